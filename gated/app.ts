import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Signals } from '../core/signals.js';
import { LazyShellParser } from '../router/shell.js';
import type { Channel } from '../channels/channel.js';
import { createInbox } from '../channels/inbox.js';
import { createChannels, startChannels } from '../channels/registry.js';
import { WebChannel } from '../channels/web/index.js';
import { createDelivery, type Delivery } from '../delivery/delivery.js';
import { createDrafts } from '../delivery/drafts.js';
import { createGateway, type Gateway } from '../gateway/gateway.js';
import { watchCommits } from '../gateway/watch.js';
import { agentSetupOf } from '../queue/agent-setup.js';
import { AskBroker } from '../queue/asks.js';
import { ToolCallLog } from '../queue/tool-calls.js';
import { ToolCallStore } from '../store/tool-calls.js';
import { receiptKey } from './receipt-key.js';
import { createQueue, type WorkQueue } from '../queue/queue.js';
import { createApprovalNotifier } from '../delivery/approvals.js';
import { AccessSource } from '../store/access.js';
import { createHistoryIndexer } from '../store/history-index.js';
import { withActor } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { addGroup, listGroups } from '../store/groups.js';
import { History } from '../store/history.js';
import {
  openBase,
  runSteps,
  STEP_BOUND_MS,
  type Base,
  type ShutdownStep,
  type StartOptions,
} from './base.js';
import { flushHistoryEvery } from '../store/history-flush.js';
import { startTracing } from './tracing.js';
import { loadShellParser } from '../queue/shell-parser.js';
import { createTypingKeeper } from '../delivery/typing.js';
import { spokenReplies, startTranscriber } from './voice.js';
import { webApp } from '../http/live.js';

export type { StartOptions } from './base.js';

/** A running gated. `close()` is idempotent and runs every step even when one fails. */
export interface Gated {
  db: Db;
  config: Config;
  log: Logger;
  gateway: Gateway;
  queue: WorkQueue;
  delivery: Delivery;
  web: WebChannel;
  metrics: Metrics;
  /** The wake signals every stage was given (core/signals.ts). */
  signals: Signals;
  /** The per-minute history; undefined when GATED_HISTORY_DAYS is 0. */
  history: History | undefined;
  channels: Channel[];
  /** The web chat's URL when HTTP is on. */
  url: string | undefined;
  close(graceMs?: number): Promise<void>;
}

/** How long after gated serves the runtime and the shell parser are prepared (a run before does it). */
const WARM_AFTER_MS = 500;

/**
 * Starts the whole gateway on `config`: database, runtime, queue, poll loop, delivery, channels and the
 * HTTP server. The only place that wires real I/O together. The wake signals are made first and passed
 * down, so every stage is built once, in order, with the parts it needs, and nothing calls back up here.
 */
export async function startGated(opts: StartOptions): Promise<Gated> {
  const base = await openBase(opts);
  const { config, log, db } = base;
  // Before any stage: the first message polled already has its trace (off unless configured).
  const tracing = await startTracing(config, log);
  if (opts.demo && listGroups(db).length === 0) {
    withActor(db, 'gated', () => addGroup(db, config.groupsDir, 'demo', 'Demo'));
    log.info('registered the demo group (web chats of web:demo reach it)');
  }
  const channels: Channel[] = [base.web, ...(opts.channels ?? (await createChannels(config, { db, log })))];
  // Tool questions are asked through the channels that started; none has before startChannels.
  const started: Channel[] = [];
  // The bash parser of tool rules (two .wasm files, about 40 ms) loads after gated serves (WARM_AFTER_MS).
  const shell = new LazyShellParser(loadShellParser, (err) =>
    log.error({ err: (err as Error).message }, 'the shell parser did not load: every shell call is asked'),
  );
  const { queue, gateway, asks } = makeStages(base, channels, started, shell);
  // A platform that cannot start (bad token) is left out of delivery too: its rows wait, pending, for a
  // start that works instead of burning retries.
  started.push(...(await startChannels(channels, gateway.inbound, log)));
  base.metrics.heldFrom(gateway.pipeline.gate);
  const stop = startOutbound(base, started, { queue, gateway, asks }, opts.watchCommits !== false);
  base.http?.serve(webApp({ ...base, channels: started, gateway, queue }));
  // What the first run and the first tool question would wait for, prepared in the background a moment
  // after gated serves: the spawner's fork blocks the event loop (10-20 ms, more on a loaded machine),
  // which the requests right after a start (a health check, the first page) need not wait for.
  const warming = setTimeout(() => (base.runtime.warm?.(), void shell.warm()), WARM_AFTER_MS);
  const history = flushHistoryEvery(db, base.history, opts.historyFlushMs ?? 60_000, log);
  // What was said becomes searchable behind the pipe (docs/MEMORY.md), never in a message's transaction.
  const indexer = createHistoryIndexer({ db, log: log.child({ part: 'history-index' }) });
  if (config.historyIndex) indexer.start();

  const steps = (graceMs: number): ShutdownStep[] => [
    ...stop.before,
    ['queue', () => queue.close(graceMs), graceMs + STEP_BOUND_MS],
    ...stop.after,
    ['history-index', () => indexer.stop()],
    ['http', () => base.http?.close()],
    ['history', history],
    ['runtime', () => base.runtime.close?.()],
    ['traces', () => tracing?.shutdown()],
    // What the last turn wrote commits before the owner row goes and before the database closes.
    ['group commit', () => base.group?.close()],
    ['owner', () => base.owner?.release()],
    ['checkpoints', () => base.checkpoints.close()],
    ['database', () => db.close()],
  ];
  let closing: Promise<void> | undefined;
  const close = (graceMs = 10_000): Promise<void> =>
    (closing ??= (clearTimeout(warming), runSteps(steps(graceMs), log)));
  const { metrics, signals, web } = base;
  const delivery = stop.delivery;
  return {
    db,
    config,
    log,
    gateway,
    queue,
    delivery,
    web,
    metrics,
    signals,
    channels: started,
    close,
    history: base.history,
    url: base.http?.url,
  };
}

/** The stages that take work from rows: the queue with its tool question broker, and the gateway. */
interface Stages {
  queue: WorkQueue;
  gateway: Gateway;
  asks: AskBroker;
}

/** The queue, its tool question broker and the gateway (nothing runs yet). */
function makeStages(
  base: Base,
  channels: readonly Channel[],
  started: readonly Channel[],
  shell: LazyShellParser,
): Stages {
  const { config, log, db, metrics, signals } = base;
  // Each message's sender_role in agent input comes from the live access rules.
  const access = new AccessSource(db, config.admins);
  // Tool questions (docs/APPROVALS.md) and workflow gates (docs/WORKFLOWS.md): chats are asked through the
  // channels once they have started.
  const notifier = createApprovalNotifier({
    db,
    channels: started,
    log: log.child({ part: 'approvals' }),
    signals,
  });
  // Tool calls and their receipts (docs/SECURITY.md, "Receipts"), signed under the instance's key.
  const calls = new ToolCallLog(
    new ToolCallStore(db, receiptKey(config.receiptKeyFile)),
    log.child({ part: 'tool-calls' }),
    Date.now,
  );
  const asks = new AskBroker({
    db,
    calls,
    log: log.child({ part: 'asks' }),
    timeoutMs: config.approvalTimeoutMs,
    shell,
    checkMs: config.pollMs,
    signals,
    notifier,
  });
  const queue = createQueue({
    db,
    runtime: base.runtime,
    config,
    log: log.child({ part: 'queue' }),
    signals,
    metrics,
    secrets: config.agentSecrets,
    githubWorktrees: config.github?.worktrees === true,
    // Container runtimes see configuration folders where they are mounted; the process runtime, on the host.
    setup: agentSetupOf(db, config, base.runtime.name !== 'process'),
    access,
    actions: {
      tz: config.tz,
      maxDepth: config.maxDelegationDepth,
      maxHops: config.maxDelegationHops,
      taskBounds: { minIntervalMs: config.taskMinIntervalMs, maxActive: config.tasksPerGroup },
      memoryBounds: { maxFacts: config.memoryMaxFacts, maxFactBytes: config.memoryMaxFactBytes },
      metrics,
    },
    asks,
    calls,
  });
  const gateway = createGateway({
    db,
    config,
    log: log.child({ part: 'gateway' }),
    queue,
    transcribe: config.transcribe !== undefined,
    signals,
    metrics,
    asker: notifier,
    // The bot's own username as the platform told it at start (Telegram getMe): each channel's `identity`.
    channels,
  });
  return { queue, gateway, asks };
}

/** What startOutbound started, with the shutdown steps before and after the queue's. */
interface Outbound {
  delivery: Delivery;
  before: ShutdownStep[];
  after: ShutdownStep[];
}

/**
 * Starts what needs the started channels: typing, drafts, delivery and the inbox; then the runs that a
 * restart interrupted (only now: a re-run's first drafts would be lost before the channels are up), the
 * gateway, and the commit watcher.
 */
function startOutbound(
  base: Base,
  started: Channel[],
  { queue, gateway, asks }: Stages,
  watch: boolean,
): Outbound {
  const { config, log, db, signals, history } = base;
  // While a chat's agent works, the chat shows typing (only on channels that started).
  const typing = createTypingKeeper({ channels: started, log: log.child({ part: 'typing' }), signals });
  const drafts = createDrafts({
    db,
    channels: started,
    log: log.child({ part: 'drafts' }),
    streamChannels: config.streamChannels,
    signals,
  });
  asks.start();
  queue.recover();
  const delivery = createDelivery({
    db,
    channels: started,
    drafts,
    groupsDir: config.groupsDir,
    spoken: spokenReplies(base),
    log: log.child({ part: 'delivery' }),
    signals,
    metrics: base.metrics,
    ...(history ? { history } : {}),
  });
  // Rows the gateway routed with files (the `files` signal): the inbox fetches them into the routed folder.
  const inbox = createInbox({
    db,
    channels: started,
    groupsDir: config.groupsDir,
    maxBytes: config.maxAttachmentBytes,
    log: log.child({ part: 'inbox' }),
    signals,
    pollMs: config.pollMs,
  });
  const transcriber = startTranscriber(base, started);
  gateway.start();
  delivery.start();
  inbox.start();
  transcriber?.start();
  // Rows other processes commit wake the loop (and delivery, for replies written elsewhere) at once.
  const commits = watch ? watchCommits(db, config.db, signals, log) : { close() {} };
  return {
    delivery,
    before: [
      ['typing', () => typing.stop()],
      ['channels', () => Promise.all(started.map((c) => c.stop()))],
      ['gateway', () => (commits.close(), gateway.stop())],
    ],
    after: [
      ['asks', () => asks.stop()],
      ['delivery', () => delivery.stop()],
      ['inbox', () => inbox.stop()],
      ['transcriber', () => transcriber?.stop()],
      ['drafts', () => drafts.stop()],
    ],
  };
}
