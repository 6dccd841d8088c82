import { coerceError } from '../core/errors.js';
import { sessionKeyId, type BusyMode, type SessionKey } from '../core/types.js';
import { replyText } from './protocol/clean.js';
import { sessionIdProblem } from './protocol/bounds.js';
import { createOutputParser, draftOnly, type OutputBlock } from './protocol/parser.js';
import { followUpLine } from './prompt.js';
import type { BatchRow, BlockCommit } from '../store/queue.js';
import { EngineError } from './runtime/engine.js';
import type { AgentExit, AgentHandle, RunSpec } from './runtime/types.js';
import { INTERRUPT_GRACE_MS, Interrupts } from './interrupts.js';
import { rowIds, Turns } from './turns.js';
import { RunTrace } from '../core/trace.js';
import { Inbox } from './inbox.js';
import { HardTimeout } from './hard-timeout.js';
import type { CloseReason, KillReason } from './run-end.js';

/**
 * One agent run, from dispatch to exit: starts the agent, writes its input and follow-ups, reads its output
 * blocks as they arrive, runs the idle and hard timers, and reports how it ended. It never touches the
 * database itself: the queue turns its callbacks into rows, so every write stays in one place.
 */

export type { CloseReason, KillReason, RunEnd } from './run-end.js';

import type { RunHooksOf } from './run-hooks.js';

/** What a run needs from the queue (queue/run-hooks.ts). */
export type RunHooks = RunHooksOf<Run>;

/** A live run of one session key for one chat. */
export class Run {
  readonly keyId: string;
  /** Epoch ms of dispatch. */
  readonly startedMs: number;
  /** The lines written to the agent and which of them it answered. Turn 1 is the input. */
  readonly turns = new Turns();
  /** The run's spans when tracing is on (core/trace.ts). */
  readonly trace: RunTrace;
  /** Set by /new: later session ids from this run are ignored. */
  sessionReset = false;
  /** system_messages ids this run consumed (given back if it never used them). */
  noteIds: readonly number[] = [];
  /** Epoch ms of the last block, or null before the first. */
  lastOutputMs: number | null = null;
  /** registered_groups.busy of the group when the run started: what a follow-up does to a busy agent. */
  busy: BusyMode = 'queue';
  /** The interrupts written to this run's agent (docs/PROTOCOL.md). */
  private readonly interrupts: Interrupts;
  private handle: AgentHandle | null = null;
  private phase: 'starting' | 'running' | 'closing' | 'ended' = 'starting';
  /** Set once gated asked the agent to finish (before or after its start); the first reason wins. */
  private closedFor: CloseReason | null = null;
  private killed: KillReason | null = null;
  private blocks = 0;
  private replies = 0;
  private retryReason: string | null = null;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Stands still while questions wait for a decision (hold; `hard.held` while one waits). */
  readonly hard: HardTimeout;
  /** Aborts the runtime's start: a start still pending at the hard timeout is given up (kill). */
  private readonly starting = new AbortController();
  /** The agent's events wait here while another process holds the write lock (queue/inbox.ts). */
  private readonly inbox = new Inbox(
    () => this.hooks.writable?.() ?? true,
    (fn) => this.trace.within(fn),
    (on) => (on ? this.handle?.stdout.resume() : this.handle?.stdout.pause()),
  );
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
    const fields = { runId, key: this.keyId };
    const graceMs = hooks.interruptGraceMs ?? INTERRUPT_GRACE_MS;
    this.interrupts = new Interrupts(hooks.log, fields, graceMs, hooks.now, () => hooks.onInterrupt?.(this));
    this.turns.add(rows);
    this.trace = new RunTrace({ runId, group: key.group, topic: key.topic, chatJid });
    this.hard = new HardTimeout(hooks.now, () => this.kill('timeout'));
    this.trace.begin(rowIds(rows), now);
  }

  /** Idle: every turn written is answered and the agent still reads stdin. */
  get idle(): boolean {
    return this.phase === 'running' && this.turns.open === 0;
  }

  /**
   * A follow-up line may be written now: stdin open, the agent not asked to exit, and either no turn open
   * or an agent that numbers its blocks.
   */
  get acceptsFollowUps(): boolean {
    return this.phase === 'running' && this.handle !== null && this.handle.stdinOpen && this.turns.canWrite;
  }

  /** True once stdin was closed on purpose (idle timeout, fairness, /new, shutdown). */
  get closing(): boolean {
    return this.closedFor !== null && this.phase !== 'ended';
  }

  /** Starts the agent and feeds it `input`; resolves when the run has ended (not settled). */
  async begin(spec: () => RunSpec | Promise<RunSpec>, input: string): Promise<void> {
    this.hard.arm(this.hooks.runTimeoutMs);
    let handle: AgentHandle;
    try {
      handle = await this.hooks.runtime.start({ ...(await spec()), signal: this.starting.signal });
    } catch (err) {
      // Given up by the hard timeout while the start was pending (kill): that end is the run's.
      if (this.starting.signal.aborted) return;
      const e = coerceError(err);
      const down = e instanceof EngineError && e.problem === 'unreachable';
      return this.end(null, `start failed: ${e.message}`, down ? e.message : null);
    }
    if (this.starting.signal.aborted) {
      // The start came back after the run was given up by its timeout: this agent serves nobody.
      handle.kill();
      handle.stdout.resume();
      return;
    }
    this.handle = handle;
    const parser = createOutputParser({
      maxBlockBytes: this.hooks.maxOutputBytes,
      // A draft block with nothing else in it writes nothing: shown without the write lock.
      onBlock: (b) => this.inbox.handle(() => this.onBlock(b), !draftOnly(b)),
      onProblem: (kind, detail) =>
        this.hooks.log.warn({ runId: this.runId, kind, detail }, 'agent output problem'),
    });
    const feed = this.trace.bind((chunk: Buffer) => parser.push(chunk));
    const stdoutDone = new Promise<void>((resolve) => {
      handle.stdout.on('data', feed);
      handle.stdout.once('end', resolve);
      handle.stdout.once('close', resolve);
      handle.stdout.once('error', resolve);
    });
    if (this.killed) handle.kill();
    else if (!handle.write(input)) {
      handle.kill();
      const exit = await handle.exited;
      return this.inbox.handle(() => this.end(exit, 'the agent closed its stdin before reading its input'));
    } else {
      this.phase = 'running';
      if (this.closedFor !== null) this.shut();
    }
    const exit = await handle.exited;
    await stdoutDone;
    parser.end();
    this.inbox.handle(() => this.end(exit, null));
  }

  /**
   * Writes rows (already joined to turn `turns.written + 1` in the database) as the next turn's line.
   * False when the agent cannot take it (stdin closed, exiting): the caller gives the rows back.
   */
  writeTurn(rows: readonly BatchRow[], notes: readonly string[] = [], steer = false): boolean {
    if (!this.acceptsFollowUps || rows.length === 0) return false;
    const turn = this.turns.written + 1;
    const messages = rows.map((r) => this.hooks.message(this, r));
    const memory = this.hooks.memory?.(this.key.group, rows);
    if (!this.handle!.write(followUpLine(turn, messages, notes, steer, memory))) return false;
    clearTimeout(this.idleTimer);
    this.turns.idle.stop(this.hooks.now());
    this.turns.add(rows);
    this.trace.turn(turn, rowIds(rows), this.hooks.now());
    return true;
  }

  /** Writes a line that is not a turn (a `permission`, docs/PROTOCOL.md): it opens and credits none. */
  writeControl(line: Record<string, unknown>): boolean {
    if (!this.acceptsControl) return false;
    return this.handle!.write(JSON.stringify(line) + '\n');
  }

  /** A line that is not a turn can be written now: the agent runs and its stdin is open. */
  get acceptsControl(): boolean {
    return (this.phase === 'running' || this.phase === 'closing') && this.handle?.stdinOpen === true;
  }

  /**
   * Stops the hard timeout while a human is asked (§18: waiting counts toward neither timeout; the idle
   * timer does not run during an open turn). Calls nest; release() resumes with the time that was left.
   */
  hold(): void {
    if (this.phase !== 'ended') this.hard.hold();
  }

  /** Ends one hold(); the last one re-arms the hard timeout with the time it had left. */
  release(): void {
    if (this.phase !== 'ended') this.hard.release();
  }

  /**
   * How long ago the hard timeout should have ended this run: 0 while it has time left, waits for a human
   * (hold) or has ended. A run the timeout killed ends within moments; one that stays overdue is wedged.
   */
  overdueMs(now: number): number {
    return this.phase === 'ended' ? 0 : this.hard.overdueMs(now);
  }

  /**
   * Asks the agent to stop the turn in progress (docs/PROTOCOL.md): writes the interrupt line for the newest
   * written turn, a line that is not a turn (writeControl), which the agent answers early with
   * `"interrupted": true`. Only an agent that numbers its blocks is asked (an older one would take the line
   * for a turn), only while a turn is open and stdin too, and one interrupt at a time. True when written.
   */
  interrupt(): boolean {
    if (!this.acceptsFollowUps || !this.turns.numbered || this.turns.open === 0) return false;
    if (!this.interrupts.allowed(this.turns.answered)) return false;
    const turn = this.turns.written;
    if (!this.writeControl({ type: 'interrupt', turn })) return false;
    this.interrupts.written(turn);
    return true;
  }

  /** Asks the agent to finish: end of stdin. Idempotent; the first reason is the one that counts. */
  closeStdin(reason: CloseReason): void {
    if (this.phase === 'ended') return;
    this.closedFor ??= reason;
    if (this.phase === 'running') this.shut();
  }

  private shut(): void {
    this.phase = 'closing';
    clearTimeout(this.idleTimer);
    this.handle?.closeStdin();
  }

  /**
   * Ends the agent now. The first reason wins. The hard timeout also ends a run whose agent has not started
   * yet: a start that never comes back (a socket the spawner passed and gated never got, its descriptors
   * run out) must not hold the run's slot forever; the start is aborted and its agent, if it comes, killed.
   */
  kill(reason: KillReason): void {
    if (this.phase === 'ended') return;
    this.killed ??= reason;
    clearTimeout(this.idleTimer);
    this.hard.clear();
    if (this.handle !== null) return this.handle.kill();
    if (reason !== 'timeout') return;
    this.starting.abort();
    const ms = this.hooks.runTimeoutMs;
    this.inbox.handle(() => this.end(null, `the agent did not start within the run timeout (${ms} ms)`));
  }

  /** Called by the queue once the run's rows are settled. */
  markSettled(): void {
    this.settled();
  }

  private onBlock(block: OutputBlock): void {
    this.lastOutputMs = this.hooks.now();
    if (block.turn !== undefined && !this.turns.numbered) {
      this.turns.numbered = true;
      // Follow-ups that came before gated knew could not be written mid-turn; now they can.
      if (this.turns.open > 0) this.hooks.onNumbered(this);
    }
    if (block.newSessionId && !this.sessionReset) {
      // An opaque handle, echoed and handed back: a huge one, or one with NUL or half a UTF-16 pair, is refused.
      const refused = sessionIdProblem(block.newSessionId);
      if (refused === null) this.hooks.onSessionId(this, block.newSessionId);
      else
        this.hooks.log.warn(
          { runId: this.runId, length: block.newSessionId.length },
          `newSessionId ignored: ${refused}`,
        );
    }
    // A question, a tool call's end or a memory question answers no turn: nothing is credited or stored.
    if (block.ask) return this.hooks.onAsk(this, block.ask);
    if (block.toolResult) return this.hooks.onToolResult(this, block.toolResult, block.usage);
    if (block.memory) return this.hooks.onMemory?.(this, block.memory);
    if (block.retry) {
      // Answers nothing: the run ends without answering and its turns are retried (the reason is kept).
      this.retryReason = (block.error ?? '').slice(0, 300) || 'the agent could not serve the turn now';
      this.hooks.log.warn(
        { runId: this.runId, key: this.keyId, reason: this.retryReason },
        'agent asks to retry later',
      );
      return;
    }
    const text = replyText(block.result, block.interrupted === true && !block.partial);
    if (block.partial) {
      if (block.actions !== undefined) this.hooks.onIgnoredActions(this, block.actions);
      if (text !== '') this.hooks.onPartial(this, block.turn ?? this.turns.current, text);
      return;
    }
    this.blocks++;
    if (block.status === 'error') {
      this.hooks.log.warn(
        { runId: this.runId, key: this.keyId, turn: block.turn, error: block.error?.slice(0, 2000) },
        'agent reported an error',
      );
    }
    const credit = this.turns.credit(block.turn);
    const files = block.files ?? [];
    const commit: BlockCommit = {
      runId: this.runId,
      through: credit.through,
      reply:
        text === '' && files.length === 0
          ? null
          : { content: text, replyTo: credit.replyTo, files: this.hooks.resolveFiles(this, files) },
      ...(block.usage ? { usage: block.usage } : {}),
      ...(block.compacted ? { compacted: true } : {}),
    };
    if (commit.through === 0 && commit.reply === null && block.actions === undefined) return;
    // Only a committed block answers: if storing failed, its turns stay open and the run's end decides.
    if (!this.hooks.onBlock(this, commit, block.actions, credit.replyTo, credit.rows)) return;
    const before = this.turns.answered;
    this.turns.answer(commit.through);
    this.trace.answered(this.turns.answered, this.hooks.now());
    if (commit.reply) this.replies++;
    else if (commit.through > before) this.hooks.onDraftsEnd(this, before + 1, commit.through);
    this.interrupts.answered(this.turns.answered, block.interrupted === true);
    if (this.phase !== 'running' || this.turns.open > 0) return;
    this.turns.idle.start(this.hooks.now());
    this.armIdle();
    this.hooks.onIdle(this);
  }

  private armIdle(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.hooks.holdIdle?.(this)) return this.armIdle();
      this.hooks.log.debug({ runId: this.runId, key: this.keyId }, 'idle timeout: closing stdin');
      this.closeStdin('idle');
    }, this.hooks.idleTimeoutMs);
  }

  private end(exit: AgentExit | null, startError: string | null, unreachable: string | null = null): void {
    this.phase = 'ended';
    clearTimeout(this.idleTimer);
    this.hard.stop();
    this.interrupts.clear();
    // Turns left open never get a reply from this run: their drafts end now (a re-run drafts anew).
    if (this.turns.open > 0) this.hooks.onDraftsEnd(this, this.turns.answered + 1, this.turns.written);
    this.hooks.onEnd(this, {
      exit,
      startError,
      unreachable: unreachable ?? exit?.engineLost ?? null,
      killed: this.killed,
      closedFor: this.closedFor,
      blocks: this.blocks,
      replies: this.replies,
      answered: this.turns.answered,
      open: this.turns.open,
      retryReason: this.retryReason,
    });
  }
}
