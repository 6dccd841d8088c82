import type { AgentExit } from './runtime/types.js';

/** Why the queue ended a run early. */
export type KillReason = 'stop' | 'timeout' | 'shutdown';

/** Why gated closed an agent's stdin: the session was idle (or yielded its slot), /new, or shutdown. */
export type CloseReason = 'idle' | 'reset' | 'shutdown';

/** How a run ended, for the queue to settle its rows. */
export interface RunEnd {
  exit: AgentExit | null;
  /** The agent could not be started or fed its input. */
  startError: string | null;
  /**
   * The container engine could not be reached: the start was refused, or the engine vanished while the
   * agent ran. Not the messages' fault: they wait for the engine without losing an attempt.
   */
  unreachable: string | null;
  killed: KillReason | null;
  /** Why gated closed stdin before the end, if it did. */
  closedFor: CloseReason | null;
  /** Answer blocks received (any status; drafts not counted). */
  blocks: number;
  replies: number;
  /** Turns answered (1..answered). */
  answered: number;
  /** Turns written and never answered: their rows are still 'running'. */
  open: number;
  /** Why the agent said it could not serve its turns now (a `retry` block), if it did. */
  retryReason: string | null;
}
