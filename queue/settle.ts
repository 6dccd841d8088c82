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
 * - The container engine could not be reached (refused the start, or vanished while the agent ran): back to
 *   'ready' as they were, not before the outage backoff (engineRetryDelayMs): an engine that is away is no
 *   fault of the messages, so no attempt is counted and nothing is parked however long it stays away.
 * - Any other end (exit ≠ 0, signal, hard timeout, other start failures): a run that answered some
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

/** Longest wait between two tries while the engine is unreachable. */
export const ENGINE_RETRY_CAP_MS = 30_000;

/**
 * Delay before runs are tried again when the engine has been unreachable for `downMs`: half the outage so
 * far (tries thin out as it lasts), between 1 s and 30 s, scaled by a jitter factor in [0.5, 1). It depends
 * on the outage, not on how many runs failed in it, so fifty lanes failing at once do not push it to the cap.
 */
export function engineRetryDelayMs(downMs: number, random: () => number = Math.random): number {
  const ms = Math.min(ENGINE_RETRY_CAP_MS, Math.max(RETRY_BASE_MS, downMs / 2));
  return Math.round(ms * (0.5 + random() * 0.5));
}

/** What settling needs besides the run. */
export interface SettleConfig {
  runTimeoutMs: number;
  maxFailures: number;
  random?: (() => number) | undefined;
  /** The outage backoff of a run that ended because the engine was unreachable (engineRetryDelayMs). */
  engineRetryMs?: number;
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
  if (end.unreachable !== null) {
    return { result: 'error', error: `engine unreachable: ${end.unreachable}`, failed: false, rows: 'later' };
  }
  if (end.killed === 'timeout') {
    return failure('timeout', end.startError ?? `no exit within ${cfg.runTimeoutMs} ms`);
  }
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
  return failure('error', end.retryReason !== null ? `${error}: ${end.retryReason}` : error);
}

/** The settlement of a run that ended at `t`. */
export function settlementOf(run: Run, end: RunEnd, t: number, cfg: SettleConfig): Settlement {
  const { result, error, failed, rows } = describe(end, cfg);
  // No answer block at all; an agent that said why (a `retry` block) still keeps its session for the retry.
  const noAnswer = end.blocks === 0;
  const silent = noAnswer && end.retryReason === null;
  const why =
    end.retryReason !== null
      ? `the last one failed: ${end.retryReason}`
      : `the last one ${result === 'timeout' ? 'timed out' : 'failed'}`;
  return {
    runId: run.runId,
    key: run.key,
    result,
    // Errors may quote agent output; rows and logs keep a bounded piece.
    error: error === null ? null : error.slice(0, 2000),
    exitCode: end.exit?.code ?? null,
    stderrTail: end.exit?.stderrTail ?? null,
    endedAt: t,
    idleMs: run.turns.idle.ms(t),
    rows,
    ...(rows === 'later' ? { notBefore: t + (cfg.engineRetryMs ?? RETRY_BASE_MS) } : {}),
    ...(failed
      ? {
          retry: {
            notBefore: (attempt: number) => t + retryDelayMs(attempt, cfg.random),
            maxFailures: cfg.maxFailures,
            parkReply: {
              content:
                `The agent could not answer (${cfg.maxFailures} attempts, ${why}). ` +
                'Send a new message to try again.',
              replyTo: run.turns.lastRowOf(run.turns.current),
            },
          },
        }
      : {}),
    evictSession: failed && silent,
    restoreNotes: noAnswer && result !== 'ok' ? run.noteIds : [],
  };
}
