import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import { createSignals, type Signals } from '../core/signals.js';
import type { NewInbound } from '../core/types.js';
import { DaemonDispatcher } from './daemons.js';
import type { QueueControl } from './layers/types.js';
import { PollLoop, type PollLoopOptions } from './loop.js';
import type { GatewayMetrics } from './metrics-hooks.js';
import { Pipeline, type BatchOutcome, type BotChannel } from './pipeline.js';
import type { Db } from '../store/db.js';
import { insertInbound } from '../store/messages.js';
import { committed, flushGroup, OrderedWrites } from '../store/group-commit.js';
import { RouteSource, type Catalog } from '../store/routes.js';
import { TaskScheduler } from './tasks.js';
import { WorkflowEngine, type GateAsker } from './workflows.js';

/** Options of the gateway: the database, the queue it feeds, and what it tells about replies it wrote. */
export interface GatewayOptions {
  db: Db;
  config: Pick<Config, 'pollMs' | 'admins'> &
    Partial<Pick<Config, 'tz' | 'taskMaxFailures' | 'maxInputBytes' | 'configDir'>>;
  log: Logger;
  queue: QueueControl;
  /**
   * The wake signals (core/signals.ts): the loop listens to `inbound`, the tasks to `tasks`; the gateway
   * fires `queued` when rows entered a lane, `files` when a routed row waits for its files, `outbound` when
   * it wrote answer rows, `decided` once a batch with `/approve` or `/reject` committed, `workflows` once a
   * `/workflow` started or resumed a run, and `backlog` when the loop falls behind by more than a slice
   * or catches up. Default: signals of its own.
   */
  signals?: Pick<
    Signals,
    'inbound' | 'queued' | 'files' | 'outbound' | 'backlog' | 'decided' | 'tasks' | 'workflows'
  > &
    Partial<Pick<Signals, 'transcribe'>>;
  /** Transcription is on (docs/VOICE.md): rows with audio wait for their transcripts; `transcribe` fires. */
  transcribe?: boolean;
  now?: () => number;
  metrics?: GatewayMetrics;
  /** The channels of this process: their bot usernames once started (`/cmd@otherbot` is text). */
  channels?: readonly BotChannel[];
  /** The poll loop's batch size and slice (gateway/loop.ts BATCH_SIZE, SLICE_MS), for tests. */
  loop?: Pick<PollLoopOptions, 'batchSize' | 'sliceMs'>;
  fetch?: typeof fetch;
  /** Backoff bounds of daemon retries (defaults 1 s .. 5 min). */
  daemonRetry?: { baseDelayMs: number; maxDelayMs: number };
  /** Asks a workflow gate's chat (delivery's approval messages, docs/WORKFLOWS.md). */
  asker?: GateAsker;
}

/** The running gateway: poll loop, layers, impulse gate and daemon dispatch. */
export interface Gateway {
  readonly routes: RouteSource;
  readonly loop: PollLoop;
  readonly pipeline: Pipeline;
  readonly daemons: DaemonDispatcher;
  readonly tasks: TaskScheduler;
  readonly workflows: WorkflowEngine;
  /**
   * Stores an inbound event and wakes the loop (null: a redelivery), committed when it resolves: what
   * channels are given. While another process holds the write lock (an operator's open transaction in
   * `sqlite3`) the event waits for it off the event loop, behind the events that came before it.
   */
  inbound(msg: NewInbound): Promise<number | null>;
  /**
   * `inbound` at once: waits for another process's write lock on the event loop, as any plain write does.
   * For tests and tools that hold no chat up; channels use `inbound`.
   */
  sink(msg: NewInbound): number | null;
  start(): void;
  /** Stops the loop, daemons, tasks and workflows; resolves when the steps in flight have ended. */
  stop(): Promise<void>;
}

/** Logs the invalid rows of a newly compiled routing table: once per change, never per message. */
function reportCatalog(log: Logger, catalog: Catalog): void {
  const problems = catalog.table.problems();
  for (const p of problems)
    log.warn({ routeId: p.id, reason: p.reason }, 'route row is invalid and never matches');
  log.info(
    {
      version: catalog.version,
      routes: catalog.table.routes.length,
      invalid: problems.length,
      groups: catalog.groups.size,
    },
    'routing table loaded',
  );
}

/**
 * What a processed batch tells the other stages: released chats to the scheduler, answers to delivery, rows
 * for daemons to their dispatcher; a command's side effects run once the batch is committed (with group
 * commit, at the end of the turn), each followed by delivery.
 */
function afterBatch(
  outcome: BatchOutcome,
  signals: Pick<Signals, 'queued' | 'files' | 'outbound' | 'decided' | 'workflows'> &
    Partial<Pick<Signals, 'transcribe'>>,
  daemons: DaemonDispatcher,
  log: Logger,
  db: Db,
): void {
  const outbound = () => signals.outbound.fire(undefined);
  if (outcome.released) signals.queued.fire();
  if (outcome.files) signals.files.fire();
  if (outcome.outbound) outbound();
  if (outcome.daemon) daemons.wake();
  if (outcome.transcribing) signals.transcribe?.fire();
  const workflows = outcome.workflows ?? 0;
  if (outcome.effects.length === 0 && outcome.decided === 0 && workflows === 0) return;
  const batchCommitted = Promise.resolve(committed(db));
  // A decision reaches the waiting agent only once it is durable.
  if (outcome.decided > 0) void batchCommitted.then(() => signals.decided.fire());
  if (workflows > 0) void batchCommitted.then(() => signals.workflows.fire());
  for (const effect of outcome.effects) {
    batchCommitted
      .then(effect)
      .then(outbound)
      .catch((err) => log.error({ err }, 'command side effect failed'));
  }
}

/** The workers that turn rows into more rows: scheduled tasks and workflow runs (docs/WORKFLOWS.md). */
function rowWorkers(
  opts: GatewayOptions,
  signals: Pick<Signals, 'queued' | 'outbound' | 'decided' | 'tasks' | 'workflows'>,
) {
  const { db, log } = opts;
  const now = opts.now ? { now: opts.now } : {};
  const tasks = new TaskScheduler({
    db,
    log: log.child({ part: 'tasks' }),
    tz: opts.config.tz ?? 'UTC',
    maxFailures: opts.config.taskMaxFailures ?? 5,
    intervalMs: opts.config.pollMs,
    ...now,
    signals,
  });
  const asker = opts.asker ? { asker: opts.asker } : {};
  const workflows = new WorkflowEngine({
    db,
    log: log.child({ part: 'workflows' }),
    intervalMs: opts.config.pollMs,
    ...now,
    signals,
    ...asker,
  });
  return { tasks, workflows };
}

/** Wires the gateway together. Nothing runs until start(). */
export function createGateway(opts: GatewayOptions): Gateway {
  const { db, log, queue } = opts;
  const signals = opts.signals ?? createSignals();
  const routes = new RouteSource(db, (c) => reportCatalog(log, c));
  const pipeline = new Pipeline({
    db,
    config: opts.config,
    log,
    routes,
    queue,
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    ...(opts.channels ? { channels: opts.channels } : {}),
    ...(opts.transcribe ? { transcribe: true } : {}),
  });
  const daemons = new DaemonDispatcher({
    db,
    routes,
    log: log.child({ part: 'daemons' }),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
    ...opts.daemonRetry,
  });
  const { tasks, workflows } = rowWorkers(opts, signals);
  const loop = new PollLoop({
    db,
    pipeline,
    log: log.child({ part: 'loop' }),
    pollMs: opts.config.pollMs,
    ...(opts.transcribe ? { transcribed: true } : {}),
    ...(opts.config.maxInputBytes ? { maxContentChars: opts.config.maxInputBytes } : {}),
    ...opts.loop,
    ...(opts.now ? { now: opts.now } : {}),
    onTick: (s: number) => opts.metrics?.pollTick(s),
    onBacklog: (more) => signals.backlog.fire(more),
    onBatch: (outcome) => afterBatch(outcome, signals, daemons, log, db),
  });
  const unlisten = signals.inbound.on(() => loop.wake());
  const store = (msg: NewInbound): number | null => {
    const id = insertInbound(db, msg);
    flushGroup(db); // committed before a channel tells its platform it took the event (group commit)
    if (id !== null) signals.inbound.fire();
    return id;
  };
  const inOrder = new OrderedWrites(db);
  return {
    routes,
    loop,
    pipeline,
    daemons,
    tasks,
    workflows,
    inbound: (msg) => inOrder.run(() => store(msg)),
    sink: store,
    start() {
      routes.current();
      loop.start();
      daemons.wake();
      tasks.start();
      workflows.start();
    },
    async stop() {
      unlisten();
      await Promise.all([loop.stop(), daemons.stop(), tasks.stop(), workflows.stop()]);
    },
  };
}
