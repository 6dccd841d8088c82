import { backoffDelay } from '../core/backoff.js';
import type { Run, RunEnd } from './run.js';
import type { Settlement } from '../store/queue.js';
import type { RunResult } from './types.js';

/**
 * The failure rule (docs/QUEUE.md), as one pure function from how a run ended to what happens to the rows
 * of the turns no block answered (rows of answered turns are already 'done' and stay so).
 *
 * - Clean exit after gated closed stdin because the session was idle: done without a reply (the agent
 *   read them and chose silence). Clean exit while stdin was open, after /new or at shutdown: back to
 *   'ready' for a new run, unless the run answered no turn at all, which is a failure (an agent that exits
 *   at once without answering would otherwise be started again forever).
 * - /stop: 'stopped', never retried. Shutdown kill: back to 'ready' as they were.
 * - Any other end (exit ≠ 0, signal, hard timeout, start failure, engine lost): a run that answered some
 *   turn gives the rest back to 'ready' as they were; one that answered none is a failure: attempts + 1 and
 *   a capped, jittered exponential backoff, parked with one error reply after `maxFailures`. A run with no
 *   output at all also loses its session, so the retry starts fresh.
 */

/** Backoff base and cap of a failed batch. */
export const RETRY_BASE_MS = 1000;
export const RETRY_CAP_MS = 60_000;

/** Delay before try `attempt + 1` after `attempt` failures: 1 s·2^(n−1), capped at 60 s, scaled by a
 * jitter factor in [0.5, 1) so that lanes failing together do not retry together. */
export function retryDelayMs(attempt: number, random: () => number = Math.random): number {
  return backoffDelay(attempt, { baseMs: RETRY_BASE_MS, maxMs: RETRY_CAP_MS, random });
}

/** What settling needs besides the run. */
export interface SettleConfig {
  runTimeoutMs: number;
  maxFailures: number;
  random?: (() => number) | undefined;
}

function describe(
  end: RunEnd,
  cfg: SettleConfig,
): { result: RunResult; error: string | null; failed: boolean; rows: Settlement['rows'] } {
  const answeredSome = end.answered > 0;
  const failure = (result: RunResult, error: string) =>
    ({ result, error, failed: !answeredSome, rows: answeredSome ? 'ready' : 'retry' }) as const;
  if (end.killed === 'stop') {
    return { result: 'stopped', error: 'stopped by /stop', failed: false, rows: 'stopped' };
  }
  if (end.killed === 'shutdown') {
    return { result: 'error', error: 'interrupted: gated shutting down', failed: false, rows: 'ready' };
  }
  if (end.killed === 'timeout') return failure('timeout', `no exit within ${cfg.runTimeoutMs} ms`);
  if (end.startError !== null || end.exit === null) {
    return failure('error', end.startError ?? 'the agent did not start');
  }
  const { code, signal } = end.exit;
  if (code === 0 && signal === null) {
    if (end.open === 0 || end.closedFor === 'idle') {
      return { result: 'ok', error: null, failed: false, rows: 'done' };
    }
    if (!answeredSome && end.closedFor === null) {
      return failure('error', 'exited without answering while its stdin was open');
    }
    return { result: 'ok', error: null, failed: false, rows: 'ready' };
  }
  const error =
    signal !== null
      ? `killed by ${signal}`
      : code === null
        ? 'no exit status (the engine lost the agent)'
        : `exit code ${code}`;
  return failure('error', error);
}

/** The settlement of a run that ended at `t`. */
export function settlementOf(run: Run, end: RunEnd, t: number, cfg: SettleConfig): Settlement {
  const { result, error, failed, rows } = describe(end, cfg);
  const silent = end.blocks === 0;
  return {
    runId: run.runId,
    key: run.key,
    result,
    // Errors may quote agent output; rows and logs keep a bounded piece.
    error: error === null ? null : error.slice(0, 2000),
    exitCode: end.exit?.code ?? null,
    stderrTail: end.exit?.stderrTail ?? null,
    endedAt: t,
    rows,
    ...(failed
      ? {
          retry: {
            notBefore: (attempt: number) => t + retryDelayMs(attempt, cfg.random),
            maxFailures: cfg.maxFailures,
            parkReply: {
              content:
                `The agent could not answer (${cfg.maxFailures} attempts, the last one ` +
                `${result === 'timeout' ? 'timed out' : 'failed'}). Send a new message to try again.`,
              replyTo: run.turns.lastRowOf(run.turns.current),
            },
          },
        }
      : {}),
    evictSession: failed && silent,
    restoreNotes: silent && result !== 'ok' ? run.noteIds : [],
  };
}
