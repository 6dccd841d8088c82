import { Worker } from 'node:worker_threads';
import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { packageFile } from '../core/paths.js';
import type { Db } from './db.js';

/** When the checkpoint worker copies the WAL into the database file (docs/OPERATIONS.md). */
export interface CheckpointPolicy {
  /** How often the worker looks at the WAL, in ms. */
  everyMs: number;
  /** A PASSIVE checkpoint once this many frames (pages) wait in the WAL: SQLite's own default, 1,000. */
  frames: number;
  /** …or once fewer have waited this long with the WAL no longer growing, in ms. */
  idleMs: number;
  /** A WAL file larger than this is checkpointed to its end and truncated (TRUNCATE), bounding its size. */
  truncateBytes: number;
  /** How long a TRUNCATE waits for other connections' locks before it gives up until the next look, ms. */
  lockWaitMs: number;
}

/**
 * A look every 100 ms; a checkpoint at 1,000 waiting frames or after 1 s without new ones; the WAL truncated
 * past 64 MiB, a TRUNCATE waiting at most 50 ms for the locks.
 */
export const DEFAULT_CHECKPOINT_POLICY: CheckpointPolicy = {
  everyMs: 100,
  frames: 1000,
  idleMs: 1000,
  truncateBytes: 64 * 2 ** 20,
  lockWaitMs: 50,
};

/** SQLite's own default: a connection that commits checkpoints once the WAL holds this many pages. */
const SQLITE_AUTOCHECKPOINT_PAGES = 1000;

/** One checkpoint the worker ran: `frames` in the WAL, `copied` of them in the database file after it. */
export interface CheckpointResult {
  mode: 'PASSIVE' | 'TRUNCATE';
  /** 1 when another connection's lock kept it from finishing (it goes on at the next look). */
  busy: number;
  frames: number;
  copied: number;
  ms: number;
}

/** What one look of the worker did: a PASSIVE checkpoint, and a TRUNCATE when the WAL was over the bound. */
export interface CheckpointPass {
  passive: CheckpointResult;
  bound?: CheckpointResult;
  /** Size of the WAL file when the worker looked. */
  walBytes: number;
}

/** The running checkpoint worker. */
export interface Checkpointer {
  /** Passes run, TRUNCATEs run, the longest pass (ms) and the WAL's size at the last pass. */
  readonly stats: { passes: number; truncates: number; maxPassMs: number; walBytes: number };
  /** Stops the worker (its connection closed) and gives the main connection its autocheckpoint back. */
  close(): Promise<void>;
}

/**
 * Moves WAL checkpoints of `db` off the event loop: the main connection's autocheckpoint is turned off and
 * a worker thread with its own connection checkpoints instead (store/checkpoint-worker.mjs). If the worker
 * fails, the main connection checkpoints by itself again, as SQLite does by default, and says so. A
 * database in memory has no WAL: nothing is started.
 */
export function startCheckpointer(
  db: Db,
  opts: {
    log: Logger;
    policy?: Partial<CheckpointPolicy>;
    /** Told each pass (gated's metrics registry: the checkpoints' times and the WAL's size). */
    metrics?: { walCheckpoint(pass: CheckpointPass): void };
  },
): Checkpointer {
  const stats = { passes: 0, truncates: 0, maxPassMs: 0, walBytes: 0 };
  if (db.memory) return { stats, close: async () => undefined };
  const policy = { ...DEFAULT_CHECKPOINT_POLICY, ...opts.policy };
  const log = opts.log;
  const worker = new Worker(packageFile('store', 'checkpoint-worker.mjs'), {
    workerData: { path: db.name, ...policy },
  });
  worker.unref();
  db.pragma('wal_autocheckpoint = 0');
  let closing = false;
  let lastError = '';
  const fallBack = (why: string) => {
    if (closing) return;
    closing = true;
    log.warn({ err: why }, 'the checkpoint worker stopped; the main connection checkpoints again');
    if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
  };
  worker.on('message', (m: { type: string; message?: string } & CheckpointPass) => {
    if (m.type === 'error') {
      // One line per distinct error: a failing disk would otherwise log ten times a second.
      if (m.message !== lastError) log.warn({ err: m.message }, 'a WAL checkpoint failed; retried');
      lastError = m.message ?? '';
      return;
    }
    lastError = '';
    stats.passes += 1;
    if (m.bound) stats.truncates += 1;
    stats.maxPassMs = Math.max(stats.maxPassMs, m.passive.ms + (m.bound?.ms ?? 0));
    stats.walBytes = m.walBytes;
    opts.metrics?.walCheckpoint(m);
  });
  worker.on('error', (err) => fallBack(coerceError(err).message));
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', (code) => {
      fallBack(`exited with code ${code}`);
      resolve();
    }),
  );
  return {
    stats,
    async close() {
      if (!closing) {
        closing = true;
        worker.postMessage('close');
        const timer = setTimeout(() => void worker.terminate(), 5000);
        await exited;
        clearTimeout(timer);
        if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
      }
      await exited;
    },
  };
}
