import { dirname, join, resolve } from 'node:path';
import type { Config } from '../core/config.js';
import { coerceError } from '../core/errors.js';
import { restoreSpool } from '../core/safe-file.js';
import { createLogger, type Logger } from '../core/log.js';
import { createMetrics, type Metrics } from '../core/metrics.js';
import { createSignals, type Signals } from '../core/signals.js';
import { WebChannel } from '../channels/web/index.js';
import { startHttpServer, type HttpServer } from '../http/app.js';
import { descriptorLimit } from '../core/descriptors.js';
import type { Runtime } from '../queue/runtime/types.js';
import { startCheckpointer, type Checkpointer } from '../store/checkpoint.js';
import { openDatabase, type Db } from '../store/db.js';
import { exitOnCommitFailure, startGroupCommit, type GroupCommit } from '../store/group-commit.js';
import { moveNestedFolders } from '../store/group-layout.js';
import { History } from '../store/history.js';
import { protectDataFiles } from './data-modes.js';
import { badRowsLine, checkReadable } from './health.js';
import { claimOwner } from '../store/owner.js';
import { makeRuntime } from './runtime.js';
import type { Channel } from '../channels/channel.js';

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
  /**
   * Watch the database's WAL file so that other processes' commits wake the stages at once (gateway/watch.ts).
   * Default true; off, only the poll interval finds them, as on a network mount (the approval bench).
   */
  watchCommits?: boolean;
}

export { EXIT_COMMIT_FAILED } from '../store/group-commit.js';

/** What every stage is built on: made first, before any stage exists. */
export interface Base {
  config: Config;
  log: Logger;
  db: Db;
  /** The WAL checkpoints, on a worker thread: closed before the database. */
  checkpoints: Checkpointer;
  /** The writes of a turn in one transaction (GATED_GROUP_COMMIT); undefined when off. Committed at close. */
  group: GroupCommit | undefined;
  owner: { release(): void } | undefined;
  metrics: Metrics;
  signals: Signals;
  web: WebChannel;
  history: History | undefined;
  http: HttpServer | undefined;
  runtime: Runtime;
}

/**
 * The database (checked and owned), metrics, signals, the web channel, the history, the HTTP port and the
 * runtime. The port is bound first (answering 503 until the app is served): a port that cannot be bound,
 * or an engine that refuses, stops the start before any agent runs or any channel connects, and leaves the
 * database as a second try will find it.
 */
export async function openBase(opts: StartOptions): Promise<Base> {
  const { config } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const db = openDatabase(config.db);
  // A root gated's agents run as another user: its database, .env and data folder are not theirs to read.
  protectDataFiles(config, log);
  for (const bad of checkReadable(db, config.db)) log.warn({ table: bad.table }, badRowsLine(config.db, bad));
  const owner = opts.exclusive === false ? undefined : claimOwner(db);
  const group = config.groupCommit ? startGroupCommit(db, { onFailed: exitOnCommitFailure(log) }) : undefined;
  const metrics = createMetrics({ processMetrics: true });
  const checkpoints = startCheckpointer(db, { log, metrics });
  const signals = createSignals(log);
  // Uploads wait next to the database (the same disk and owner), outside every group's folder.
  const web = new WebChannel(db, { uploadsDir: join(dirname(resolve(config.db)), 'web-uploads') });
  const history = config.historyDays > 0 ? new History(db, { retainDays: config.historyDays }) : undefined;
  let http: HttpServer | undefined;
  try {
    // Before any run: files a killed gated held in the spool go back to their folders (only the owner may:
    // another gated reading through the spool holds its entries), then nested groups' folders leave their
    // parents' (store/group-layout.ts), carrying what came back.
    if (owner) await putBackSpool(config.groupsDir, log);
    moveNestedFolders(db, config.groupsDir, log);
    if (opts.http !== false) {
      http = await startHttpServer(undefined, {
        host: config.httpHost,
        port: config.httpPort,
        connections: config.connections,
      });
      warnDescriptors(log, config.connections.max);
      log.info({ url: http.url }, 'web chat and dashboard listening');
    }
    const runtime = opts.runtime ?? (await makeRuntime(config, db, log, metrics));
    return { config, log, db, checkpoints, group, owner, metrics, signals, web, history, http, runtime };
  } catch (err) {
    await http?.close();
    owner?.release();
    await checkpoints.close();
    group?.close();
    db.close();
    throw err;
  }
}

/**
 * A connection cap set above half the descriptor limit lets a flood of connections take the descriptors
 * that runs, agents and the database need: said once at the start (the operator's setting still holds).
 */
function warnDescriptors(log: Logger, max: number | null): void {
  const fds = descriptorLimit();
  if (max === null || fds === null || max <= fds / 2) return;
  log.warn(
    { maxConnections: max, descriptorLimit: fds },
    'GATED_HTTP_MAX_CONNECTIONS is above half the descriptor limit: a flood of connections can exhaust them',
  );
}

/** How long one shutdown step may take (the queue's: its grace period more) before the next one runs. */
export const STEP_BOUND_MS = 10_000;

/** A shutdown step: its name, what it does, and how long it may take (default STEP_BOUND_MS). */
export type ShutdownStep = [name: string, run: () => unknown, boundMs?: number];

/**
 * Runs every shutdown step in order, each despite the failure of one before it, and each within its bound:
 * a step still pending then is logged by name and left behind. A promise that can never settle (nothing
 * left to settle it) would otherwise let the event loop empty mid-shutdown, and Node would exit 13 before
 * the last writes commit, the owner row goes and the database closes; the bound's timer keeps the process
 * up until the steps after it have run.
 */
export async function runSteps(steps: ShutdownStep[], log: Logger): Promise<void> {
  for (const [name, step, boundMs = STEP_BOUND_MS] of steps) {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), boundMs)));
    try {
      const done = await Promise.race([Promise.resolve().then(step), late]);
      if (done === 'late')
        log.warn({ step: name, ms: boundMs }, 'shutdown step did not finish in time: going on without it');
    } catch (err) {
      log.error({ step: name, err: coerceError(err).message }, 'shutdown step failed');
    } finally {
      clearTimeout(timer);
    }
  }
}

/** restoreSpool (core/safe-file.ts) at start, each entry logged: put back, or left for the operator and why. */
async function putBackSpool(groupsDir: string, log: Logger): Promise<void> {
  for (const r of await restoreSpool(groupsDir)) {
    if (r.restored)
      log.info({ file: r.path }, 'a file held in the spool when gated stopped is back in its folder');
    else
      log.warn(
        { file: r.path, reason: r.reason },
        'a file held in the spool when gated stopped cannot go back: it stays in the .gated-spool folder of the groups folder',
      );
  }
}
