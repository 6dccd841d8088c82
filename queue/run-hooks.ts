import type { Logger } from '../core/log.js';
import type { ResolvedFile } from '../store/outbound-files.js';
import type { BatchRow, BlockCommit } from '../store/queue.js';
import type { BlockUsage, MemoryQuery, ToolAsk, ToolReport } from './protocol/parser.js';
import type { AgentMessage, TurnMemory } from './prompt.js';
import type { RunEnd } from './run-end.js';
import type { Runtime } from './runtime/types.js';

/**
 * What a run needs from the queue. `R` is the run itself (queue/run.ts: `RunHooks` there is
 * `RunHooksOf<Run>`; a parameter here, so that this file needs nothing of run.ts).
 */
export interface RunHooksOf<R> {
  runtime: Runtime;
  log: Logger;
  idleTimeoutMs: number;
  runTimeoutMs: number;
  /** How long an agent has to answer an interrupt (default INTERRUPT_GRACE_MS). */
  interruptGraceMs?: number;
  maxOutputBytes: number;
  now: () => number;
  /**
   * True when gated's connection can write now without another process's write lock (it opens the turn's
   * group commit, docs/QUEUE.md), else a promise of when it can (the run's events wait); absent: true.
   */
  writable?: () => true | Promise<void>;
  /** A stored row as this run's agent receives it. */
  message(run: R, row: BatchRow): AgentMessage;
  /** The files a block names, checked against the group's folder (refused ones keep their reason). */
  resolveFiles(run: R, paths: readonly string[]): ResolvedFile[];
  /**
   * An answer block: commit it (docs/QUEUE.md) with its actions, as written (`undefined`: none), acting on
   * `answering`, the newest row of the turn it speaks to. False when it could not be stored.
   */
  onBlock(
    run: R,
    commit: BlockCommit,
    actions: unknown,
    answering: BatchRow,
    rows: readonly BatchRow[],
  ): boolean;
  /** A draft block carried actions: they are not applied (logged and counted). */
  onIgnoredActions(run: R, actions: unknown): void;
  /** A draft of `turn` (`partial: true`): shown, never stored. */
  onPartial(run: R, turn: number, text: string): void;
  /**
   * Turns `from`..`to` ended without a reply of their own (answered with no text, e.g. interrupted early,
   * or never answered by a run that ended): their drafts end, and no draft of them is shown any more.
   */
  onDraftsEnd(run: R, from: number, to: number): void;
  onSessionId(run: R, sessionId: string): void;
  /** A tool question (docs/APPROVALS.md): answered later by a permission line through writeControl. */
  onAsk(run: R, ask: ToolAsk): void;
  /** A tool call's end (docs/PROTOCOL.md, "Tool calls and receipts"), with the usage the block reported. */
  onToolResult(run: R, report: ToolReport, usage: BlockUsage | undefined): void;
  onMemory?(run: R, query: MemoryQuery): void; // docs/MEMORY.md: answered by a `memory` line
  memory?(group: string, rows: readonly BatchRow[]): TurnMemory; // docs/MEMORY.md: the facts of a turn
  /** An interrupt line was written: the turn in progress is being stopped (its asks are cancelled). */
  onInterrupt?(run: R): void;
  /** The agent answered and waits for follow-ups (fairness may close its stdin). */
  onIdle(run: R): void;
  /** A first block said which turn it answers: follow-ups may now be written while a turn is open. */
  onNumbered(run: R): void;
  /** True keeps an idle run open past its idle timeout (its next turn waits on a budget question). */
  holdIdle?: (run: R) => boolean;
  onEnd(run: R, end: RunEnd): void;
}
