import { backoffDelay } from '../core/backoff.js';
import type { Run, RunEnd } from './run.js';
import type { Settlement } from './store.js';
import type { RunResult } from './types.js';

/**
 * The failure rule (docs/QUEUE.md), as one pure function from how a run ended to what happens to its rows.
 *
 * - Clean exit: rows still held are done (the agent chose not to answer them), except follow-ups written
 *   after its last block: it may have been exiting when they were written, so they go back to 'ready'.
 * - /stop: 'stopped', never retried. Shutdown kill: back to 'ready' as they were.
 * - Any other end (exit ≠ 0, signal, hard timeout, start failure) is a failure: rows still held go back to
 *   'ready' with attempts + 1 and a capped, jittered exponential backoff; after `maxFailures` consecutive
 *   failures they are parked with one error reply. Rows a reply already covered are done and stay so: a
 *   failure after output keeps what it delivered. A run with no output at all also loses its session, so
 *   the retry starts fresh.
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
): { result: RunResult; error: string | null; failed: boolean } {
  if (end.killed === 'stop') return { result: 'stopped', error: 'stopped by /stop', failed: false };
  if (end.killed === 'shutdown')
    return { result: 'error', error: 'interrupted: gated shutting down', failed: false };
  if (end.killed === 'timeout') {
    return { result: 'timeout', error: `no exit within ${cfg.runTimeoutMs} ms`, failed: true };
  }
  if (end.startError !== null || end.exit === null) {
    return { result: 'error', error: end.startError ?? 'the agent did not start', failed: true };
  }
  const { code, signal } = end.exit;
  if (code === 0 && signal === null) return { result: 'ok', error: null, failed: false };
  const error =
    signal !== null
      ? `killed by ${signal}`
      : code === null
        ? 'no exit status (the engine lost the agent)'
        : `exit code ${code}`;
  return { result: 'error', error, failed: true };
}

/** The settlement of a run that ended at `t`. */
export function settlementOf(run: Run, end: RunEnd, t: number, cfg: SettleConfig): Settlement {
  const { result, error, failed } = describe(end, cfg);
  const silent = end.blocks === 0;
  const rows: Settlement['rows'] = failed
    ? 'retry'
    : end.killed === 'stop'
      ? 'stopped'
      : end.killed === 'shutdown'
        ? 'ready'
        : 'done';
  return {
    runId: run.runId,
    key: run.key,
    result,
    error,
    exitCode: end.exit?.code ?? null,
    stderrTail: end.exit?.stderrTail ?? null,
    endedAt: t,
    rows,
    unanswered: end.unanswered,
    ...(failed
      ? {
          retry: {
            notBefore: (attempt: number) => t + retryDelayMs(attempt, cfg.random),
            maxFailures: cfg.maxFailures,
            parkReply: {
              content:
                `The agent could not answer (${cfg.maxFailures} attempts, the last one ` +
                `${result === 'timeout' ? 'timed out' : 'failed'}). Send a new message to try again.`,
              replyTo: run.lastRow,
            },
          },
        }
      : {}),
    evictSession: failed && silent,
    restoreNotes: silent && result !== 'ok' ? run.noteIds : [],
  };
}
