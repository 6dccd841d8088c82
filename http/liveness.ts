import { descriptorHealth } from '../core/descriptors.js';
import type { PollLoop } from '../gateway/loop.js';
import type { WorkQueue } from '../queue/queue.js';
import type { Db } from '../store/db.js';

/** What /healthz checks beyond "the database answers a query", by name: 'ok' or the reason it is not. */
export type LivenessChecks = Record<string, string>;

/** How many poll intervals the loop may go without a completed tick before it counts as stalled. */
const STALE_INTERVALS = 3;
/**
 * ...and never less than this many ms: with a short poll interval (50–100 ms) one busy moment of the event
 * loop (a large batch, a garbage collection on a loaded machine) is not a stalled loop.
 */
const STALE_FLOOR_MS = 2000;

const runningStmts = new WeakMap<Db, { runIds: () => number[] }>();

function runningRunIds(db: Db): number[] {
  let s = runningStmts.get(db);
  if (!s) {
    // idx_messages_running serves this: one entry per run that has rows in flight.
    const stmt = db.prepare(`SELECT DISTINCT run_id FROM messages WHERE state = 'running'`).pluck();
    s = { runIds: () => stmt.all() as number[] };
    runningStmts.set(db, s);
  }
  return s.runIds();
}

/**
 * How long a run may stay past its hard timeout before /healthz calls it wedged: the kill, the drain of
 * its output (2 s) and a container's removal fit in this many ms.
 */
export const OVERDUE_GRACE_MS = 30_000;

/**
 * The truth about a running gated for /healthz: the poll loop completed a tick within the last 3 poll
 * intervals (at least 2 s) (a failing or stuck loop answers nobody), every row in state `running` belongs to a run
 * the queue really has (a row running without a live run would never end: the queue is wedged), no run
 * outlived its hard timeout by more than OVERDUE_GRACE_MS, and gated's file descriptors are neither
 * exhausted nor near their limit (core/descriptors.ts).
 */
export function liveness(opts: {
  db: Db;
  loop: Pick<PollLoop, 'health'>;
  queue: Pick<WorkQueue, 'active' | 'overdue'>;
  pollMs: number;
  now?: number;
  /** The descriptors' state (default: this process's, from /proc). */
  descriptors?: () => string;
}): LivenessChecks {
  const now = opts.now ?? Date.now();
  const checks: LivenessChecks = {};
  const h = opts.loop.health();
  const age = now - h.lastTickAt;
  if (age > Math.max(STALE_INTERVALS * opts.pollMs, STALE_FLOOR_MS)) {
    const why = h.failing ? `: ${h.failing}` : '';
    checks.loop = `no completed poll tick for ${age} ms (${h.failures} failed)${why}`;
  } else checks.loop = 'ok';
  try {
    const live = new Set(opts.queue.active().map((a) => a.run_id));
    const orphans = runningRunIds(opts.db).filter((id) => !live.has(id));
    checks.queue =
      orphans.length === 0
        ? 'ok'
        : `rows running without a live run (run ${orphans.slice(0, 5).join(', ')}): the queue is wedged`;
  } catch (err) {
    checks.queue = `cannot read running rows: ${(err as Error).message}`;
  }
  const overdue = opts.queue.overdue().filter((o) => o.byMs > OVERDUE_GRACE_MS);
  checks.runs =
    overdue.length === 0
      ? 'ok'
      : `${overdue.length} past their run timeout (${overdue
          .slice(0, 5)
          .map((o) => `run ${o.runId} by ${Math.round(o.byMs / 1000)} s`)
          .join(', ')})`;
  checks.descriptors = (opts.descriptors ?? descriptorHealth)();
  return checks;
}
