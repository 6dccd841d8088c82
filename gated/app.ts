import { dirname, join, resolve } from 'node:path';
import type { Config } from '../core/config.js';
import { coerceError } from '../core/errors.js';
import { createLogger, type Logger } from '../core/log.js';
import { createMetrics, type Metrics } from '../core/metrics.js';
import { createSignals, type Signals } from '../core/signals.js';
import { parseJid } from '../core/types.js';
import type { Channel } from '../channels/channel.js';
import { createInbox } from '../channels/inbox.js';
import { createChannels, startChannels } from '../channels/registry.js';
import { WebChannel } from '../channels/web/index.js';
import { createDelivery, type Delivery } from '../delivery/delivery.js';
import { createDrafts } from '../delivery/drafts.js';
import { createGateway, type Gateway } from '../gateway/gateway.js';
import { watchCommits } from '../gateway/watch.js';
import { startHttpServer, type HttpServer } from '../http/app.js';
import { agentSetupOf } from '../queue/agent-setup.js';
import { createQueue, type WorkQueue } from '../queue/queue.js';
import { AskBroker } from '../queue/asks.js';
import { createApprovalNotifier } from '../delivery/approvals.js';
import type { Runtime } from '../queue/runtime/types.js';
import { AccessSource } from '../store/access.js';
import { openDatabase, type Db } from '../store/db.js';
import { addGroup, listGroups } from '../store/groups.js';
import { History } from '../store/history.js';
import { checkReadable } from './health.js';
import { claimOwner } from './owner.js';
import { makeRuntime } from './runtime.js';
import { createTypingKeeper } from './typing.js';
import { webApp } from './web.js';

/** How to start gated; everything beyond `config` has a production default. */
export interface StartOptions {
  config: Config;
  log?: Logger;
  /** Replaces the platform channels made from the configuration (the web channel is always added). */
  channels?: Channel[];
  /** Replaces the runtime made from the configuration. */
  runtime?: Runtime;
  /** Serve the web chat, dashboard and /metrics. Default true. */
  http?: boolean;
  /** Register a `demo` group when the database has no groups yet (the embedded default). Default false. */
  demo?: boolean;
  /** Refuse to start when another gated owns the database. Default true. */
  exclusive?: boolean;
  /** How often the per-minute history is written, in ms. Default 60,000 (the benchmark shortens it). */
  historyFlushMs?: number;
}

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

/**
 * Starts the whole gateway on `config`: database, runtime, queue, poll loop, delivery, channels and the
 * HTTP server. The only place that wires real I/O together. The wake signals are made first and passed
 * down, so every stage is built once, in order, with the parts it needs, and nothing calls back up here.
 */
export async function startGated(opts: StartOptions): Promise<Gated> {
  const { config } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const db = openDatabase(config.db);
  checkReadable(db, config.db);
  const owner = opts.exclusive === false ? undefined : claimOwner(db);
  const metrics = createMetrics({ processMetrics: true });
  const signals = createSignals((signal, err) =>
    log.error({ signal, err: coerceError(err).message }, 'a wake listener failed'),
  );
  // Uploads wait next to the database (the same disk and owner), outside every group's folder.
  const web = new WebChannel(db, { uploadsDir: join(dirname(resolve(config.db)), 'web-uploads') });
  const history = config.historyDays > 0 ? new History(db, { retainDays: config.historyDays }) : undefined;
  // The port is bound first (answering 503 until the app is served below): a port that cannot be bound
  // stops the start before any agent runs or any channel connects.
  let http: HttpServer | undefined;
  let runtime: Runtime;
  try {
    if (opts.http !== false) {
      http = await startHttpServer(undefined, { host: config.httpHost, port: config.httpPort });
      log.info({ url: http.url }, 'web chat and dashboard listening');
    }
    runtime = opts.runtime ?? (await makeRuntime(config, db, log, metrics));
  } catch (err) {
    // A busy port or a refused engine stops the start: leave the database as a second try will find it.
    await http?.close();
    owner?.release();
    db.close();
    throw err;
  }
  if (opts.demo && listGroups(db).length === 0) {
    addGroup(db, config.groupsDir, 'demo', 'Demo');
    log.info('registered the demo group (web chats of web:demo reach it)');
  }
  const channels: Channel[] = [web, ...(opts.channels ?? (await createChannels(config, { db, log })))];
  // Each message's sender_role in agent input comes from the live access rules.
  const access = new AccessSource(db, config.admins);
  // Tool questions (docs/APPROVALS.md): chats are asked through the channels once they have started.
  const asks = new AskBroker({
    db,
    log: log.child({ part: 'asks' }),
    timeoutMs: config.approvalTimeoutMs,
    toolDefault: config.toolDefault,
    checkMs: Math.min(config.pollMs, 500),
    notifier: createApprovalNotifier({
      db,
      channels: () => started,
      log: log.child({ part: 'approvals' }),
      onOutbound: (id) => signals.outbound.fire(id),
    }),
  });
  const queue = createQueue({
    db,
    runtime,
    config,
    log: log.child({ part: 'queue' }),
    signals,
    metrics,
    secrets: config.agentSecrets,
    // Container runtimes see configuration folders where they are mounted; the process runtime, on the host.
    setup: agentSetupOf(db, config, runtime.name !== 'process'),
    senderRole: (group, row) => access.senderRole(group, row),
    actions: { tz: config.tz, maxDepth: config.maxDelegationDepth, metrics },
    asks,
  });
  const gateway = createGateway({
    db,
    config,
    log: log.child({ part: 'gateway' }),
    queue,
    signals,
    metrics: {
      messageIn: (m) => metrics.messagesIn(parseJid(m.chat_jid).platform, m.verb),
      routed: (t) => metrics.routed(t),
      unrouted: () => metrics.unrouted(),
      pollTick: (s) => metrics.pollTick(s),
      rowFailed: (stage) => metrics.rowFailed(stage),
    },
    // The bot's own username as the platform told it at start (Telegram getMe).
    botName: (platform) =>
      (channels.find((c) => c.platform === platform) as { identity?: { username?: string } } | undefined)
        ?.identity?.username,
  });

  // A platform that cannot start (bad token) is left out of delivery too: its rows wait, pending, for a
  // start that works instead of burning retries.
  const started = await startChannels(channels, gateway.sink, log);
  metrics.heldFrom(() => gateway.pipeline.gate.heldCount());
  // While a chat's agent works, the chat shows typing (only on channels that started).
  const typing = createTypingKeeper(() => started, log.child({ part: 'typing' }));
  const untype = signals.working.on(({ chatJid, on }) => typing.set(chatJid, on));
  const drafts = createDrafts({
    db,
    channels: started,
    log: log.child({ part: 'drafts' }),
    mode: (platform) => (config.streamChannels.includes(platform) ? 'stream' : 'batch'),
    signals,
  });
  // Interrupted runs start again only now: a re-run's first drafts would be lost before the channels
  // (and the drafts that show them) are up.
  asks.start();
  queue.recover();
  const outbox = createDelivery({
    db,
    channels: started,
    drafts,
    groupsDir: config.groupsDir,
    log: log.child({ part: 'delivery' }),
    signals,
    metrics: {
      outbound(outcome) {
        metrics.outbound(outcome);
        // Failures leave no timestamped row: the history counts them as they happen.
        if (outcome !== 'delivered') history?.delivery(outcome, Date.now());
      },
    },
  });
  // Rows the gateway released may carry attachments: the inbox fetches them into the routed folder.
  const inbox = createInbox({
    db,
    channels: started,
    groupsDir: config.groupsDir,
    maxBytes: config.maxAttachmentBytes,
    log: log.child({ part: 'inbox' }),
    signals,
  });
  gateway.start();
  outbox.start();
  inbox.start();
  // Rows other processes commit wake the loop (and delivery, for replies written elsewhere) at once.
  const commits = watchCommits(
    config.db,
    () => {
      signals.inbound.fire();
      signals.outbound.fire(undefined);
      asks.wake();
    },
    log,
  );
  http?.serve(
    webApp({ db, config, log, metrics, web, channels: started, gateway, queue, runtime, history, signals }),
  );

  const flushHistory = () => {
    try {
      history?.flush(Date.now());
    } catch (err) {
      log.error({ err: coerceError(err).message }, 'writing the history failed; the next flush retries');
    }
  };
  const historyTimer = history ? setInterval(flushHistory, opts.historyFlushMs ?? 60_000) : undefined;
  historyTimer?.unref();

  const steps = (graceMs: number): Array<[string, () => unknown]> => [
    ['typing', () => (untype(), typing.stop())],
    ['channels', () => Promise.all(started.map((c) => c.stop()))],
    ['gateway', () => (commits.close(), gateway.stop())],
    ['queue', () => queue.close(graceMs)],
    ['asks', () => asks.stop()],
    ['delivery', () => outbox.stop()],
    ['inbox', () => inbox.stop()],
    ['drafts', () => drafts.stop()],
    ['http', () => http?.close()],
    ['history', () => (clearInterval(historyTimer), flushHistory())],
    ['runtime', () => runtime.close?.()],
    ['owner', () => owner?.release()],
    ['database', () => db.close()],
  ];
  let closing: Promise<void> | undefined;
  const close = (graceMs = 10_000): Promise<void> => (closing ??= runSteps(steps(graceMs), log));

  return {
    db,
    config,
    log,
    gateway,
    queue,
    delivery: outbox,
    web,
    metrics,
    signals,
    history,
    channels: started,
    url: http?.url,
    close,
  };
}

/** Runs every shutdown step in order, each despite the failure of one before it. */
async function runSteps(steps: Array<[string, () => unknown]>, log: Logger): Promise<void> {
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (err) {
      log.error({ step: name, err: coerceError(err).message }, 'shutdown step failed');
    }
  }
}
