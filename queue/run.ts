import type { Logger } from '../core/log.js';
import { coerceError } from '../core/errors.js';
import { sessionKeyId, type SessionKey } from '../core/types.js';
import { cleanResult } from './protocol/clean.js';
import { createOutputParser, type OutputBlock } from './protocol/parser.js';
import { followUpLine, type AgentMessage } from './prompt.js';
import type { BatchRow } from './store.js';
import type { AgentExit, AgentHandle, Runtime, RunSpec } from './runtime/types.js';

/**
 * One agent run, from dispatch to exit: starts the agent, writes its input and follow-ups, reads its output
 * blocks as they arrive, runs the idle and hard timers, and reports how it ended. It never touches the
 * database itself: the queue turns its callbacks into rows, so every write stays in one place.
 */

/** Why the queue ended a run early. */
export type KillReason = 'stop' | 'timeout' | 'shutdown';

/** How a run ended, for the queue to settle its rows. */
export interface RunEnd {
  exit: AgentExit | null;
  /** The agent could not be started or fed its input. */
  startError: string | null;
  killed: KillReason | null;
  /** Output blocks received (any status). */
  blocks: number;
  replies: number;
  /** Rows written as follow-ups after the agent's last block: the agent never answered them. */
  unanswered: number[];
}

/** What a run needs from the queue. */
export interface RunHooks {
  runtime: Runtime;
  log: Logger;
  idleTimeoutMs: number;
  runTimeoutMs: number;
  maxOutputBytes: number;
  now: () => number;
  /** A block with a non-empty visible result: commit it as a reply. False when it could not be stored. */
  onReply(run: Run, text: string): boolean;
  onSessionId(run: Run, sessionId: string): void;
  /** The agent answered and waits for follow-ups (fairness may close its stdin). */
  onIdle(run: Run): void;
  onEnd(run: Run, end: RunEnd): void;
}

/** A live run of one session key for one chat. */
export class Run {
  readonly keyId: string;
  /** Epoch ms of dispatch. */
  readonly startedMs: number;
  /** The newest row handed to the agent: replies answer it. */
  lastRow: BatchRow;
  /** Set by /new: later session ids from this run are ignored. */
  sessionReset = false;
  /** system_messages ids this run consumed (given back if it never used them). */
  noteIds: readonly number[] = [];
  /** Epoch ms of the last block, or null before the first. */
  lastOutputMs: number | null = null;
  private handle: AgentHandle | null = null;
  private phase: 'starting' | 'running' | 'closing' | 'ended' = 'starting';
  private closeAfterStart = false;
  private killed: KillReason | null = null;
  private blocks = 0;
  private replies = 0;
  private awaitingOutput = true;
  private sinceLastBlock: number[] = [];
  private idleTimer: NodeJS.Timeout | undefined;
  private hardTimer: NodeJS.Timeout | undefined;
  private settled!: () => void;
  /** Resolves once the run has ended and the queue has settled it. */
  readonly done = new Promise<void>((r) => (this.settled = r));

  constructor(
    readonly key: SessionKey,
    readonly runId: number,
    readonly chatJid: string,
    rows: readonly BatchRow[],
    private readonly hooks: RunHooks,
    now: number,
  ) {
    this.keyId = sessionKeyId(key);
    this.startedMs = now;
    this.lastRow = rows[rows.length - 1]!;
  }

  /** Idle: answered everything it was given and still reading stdin. */
  get idle(): boolean {
    return this.phase === 'running' && !this.awaitingOutput;
  }

  /** Follow-ups can still reach the agent: stdin open and the agent not asked to exit. */
  get acceptsFollowUps(): boolean {
    return this.phase === 'running' && this.handle !== null && this.handle.stdinOpen;
  }

  /** True once stdin was closed on purpose (idle timeout, fairness, /new, shutdown). */
  get closing(): boolean {
    return this.phase === 'closing' || this.closeAfterStart;
  }

  /** Starts the agent and feeds it `input`; resolves when the run has ended (not settled). */
  async begin(spec: () => RunSpec, input: string): Promise<void> {
    this.hardTimer = setTimeout(() => this.kill('timeout'), this.hooks.runTimeoutMs);
    let handle: AgentHandle;
    try {
      handle = await this.hooks.runtime.start(spec());
    } catch (err) {
      return this.end(null, `start failed: ${coerceError(err).message}`);
    }
    this.handle = handle;
    const parser = createOutputParser({
      maxBlockBytes: this.hooks.maxOutputBytes,
      onBlock: (b) => this.onBlock(b),
      onProblem: (kind, detail) =>
        this.hooks.log.warn({ runId: this.runId, kind, detail }, 'agent output problem'),
    });
    const stdoutDone = new Promise<void>((resolve) => {
      handle.stdout.on('data', (chunk: Buffer) => parser.push(chunk));
      handle.stdout.once('end', resolve);
      handle.stdout.once('close', resolve);
      handle.stdout.once('error', resolve);
    });
    if (this.killed) handle.kill();
    else if (!handle.write(input)) {
      handle.kill();
      const exit = await handle.exited;
      return this.end(exit, 'the agent closed its stdin before reading its input');
    } else {
      this.phase = 'running';
      if (this.closeAfterStart) this.closeStdin();
    }
    const exit = await handle.exited;
    await stdoutDone;
    parser.end();
    this.end(exit, null);
  }

  /**
   * Writes rows as one follow-up line. False when the agent cannot take it (stdin closed, exiting): the
   * rows then stay ready for the next run.
   */
  followUp(rows: readonly BatchRow[]): boolean {
    if (!this.acceptsFollowUps || rows.length === 0) return false;
    if (!this.handle!.write(followUpLine(rows.map(toAgentMessage)))) return false;
    clearTimeout(this.idleTimer);
    this.awaitingOutput = true;
    for (const r of rows) this.sinceLastBlock.push(r.id);
    this.lastRow = rows[rows.length - 1]!;
    return true;
  }

  /** Asks the agent to finish: end of stdin. Idempotent. */
  closeStdin(): void {
    if (this.phase === 'starting') {
      this.closeAfterStart = true;
      return;
    }
    if (this.phase !== 'running') return;
    this.phase = 'closing';
    clearTimeout(this.idleTimer);
    this.handle?.closeStdin();
  }

  /** Ends the agent now. The first reason wins. */
  kill(reason: KillReason): void {
    if (this.phase === 'ended') return;
    this.killed ??= reason;
    clearTimeout(this.idleTimer);
    clearTimeout(this.hardTimer);
    this.handle?.kill();
  }

  /** Called by the queue once the run's rows are settled. */
  markSettled(): void {
    this.settled();
  }

  private onBlock(block: OutputBlock): void {
    this.blocks++;
    this.lastOutputMs = this.hooks.now();
    this.awaitingOutput = false;
    this.sinceLastBlock = [];
    if (block.newSessionId && !this.sessionReset) this.hooks.onSessionId(this, block.newSessionId);
    if (block.status === 'error') {
      this.hooks.log.warn(
        { runId: this.runId, key: this.keyId, error: block.error },
        'agent reported an error',
      );
    }
    const text = block.result === null ? '' : cleanResult(block.result);
    if (text !== '' && this.hooks.onReply(this, text)) this.replies++;
    if (this.phase !== 'running') return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.hooks.log.debug({ runId: this.runId, key: this.keyId }, 'idle timeout: closing stdin');
      this.closeStdin();
    }, this.hooks.idleTimeoutMs);
    this.hooks.onIdle(this);
  }

  private end(exit: AgentExit | null, startError: string | null): void {
    this.phase = 'ended';
    clearTimeout(this.idleTimer);
    clearTimeout(this.hardTimer);
    this.hooks.onEnd(this, {
      exit,
      startError,
      killed: this.killed,
      blocks: this.blocks,
      replies: this.replies,
      unanswered: this.sinceLastBlock,
    });
  }
}

/** A stored row as the agent receives it. */
export function toAgentMessage(r: BatchRow): AgentMessage {
  return {
    id: r.id,
    sender: r.sender,
    sender_name: r.sender_name,
    content: r.content,
    verb: r.verb,
    timestamp: r.timestamp,
    platform_msg_id: r.platform_msg_id,
  };
}
