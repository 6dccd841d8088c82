import { insertOutboundFiles, type ResolvedFile } from './outbound-files.js';
import { isoNow, sessionKeyId, type SessionKey } from '../core/types.js';
import type { Db } from './db.js';
import { clipBytes } from '../core/text.js';
import { inboundRowError, insertOutbound } from './messages.js';
import { DEFAULT_MAX_INPUT, queueSql, type Statements } from './queue-sql.js';
import { grouped } from './group-commit.js';
import { laneCursor } from './lane-cursor.js';

/**
 * The queue's view of the database: lanes, batches, sessions, session_log. Statements are prepared once per
 * connection; every multi-row change is one synchronous transaction that never spans an await.
 *
 * A row is eligible when state = 'ready' and its backoff (not_before) has passed. Topics are compared with
 * NULL read as '' (the default topic), whoever wrote the row.
 */

export type { BatchRow, Dispatched, FailedRow, GroupRow, LaneSummary, ReadyLane } from './queue-rows.js';
import type { BatchRow, Dispatched, FailedRow, GroupRow, LaneSummary, ReadyLane } from './queue-rows.js';

/** How a finished run's session_log row is closed and the rows it still holds ('running') are settled. */
export interface Settlement {
  runId: number;
  key: SessionKey;
  result: 'ok' | 'error' | 'timeout' | 'stopped';
  error: string | null;
  exitCode: number | null;
  stderrTail: string | null;
  endedAt: number;
  /** Milliseconds the agent sat idle waiting for a follow-up (session_log.idle_ms); the rest was work. */
  idleMs: number | null;
  /**
   * What happens to the rows of the turns no block answered (the run's rows still 'running'): done (read
   * and left unanswered after an idle close); stopped (/stop); ready (back as they were, for a new run);
   * retry (a failure: attempts + 1 and a backoff, or parked with one error reply at `maxFailures`); later
   * (back as they were, not before the epoch ms `notBefore`: the engine was unreachable).
   */
  rows: 'done' | 'stopped' | 'ready' | 'retry' | 'later';
  notBefore?: number;
  retry?: {
    /** Epoch ms of the next try after `attempt` consecutive failures (1-based). */
    notBefore: (attempt: number) => number;
    maxFailures: number;
    /** The error reply for a parked batch, answering this row. */
    parkReply: { content: string; replyTo: BatchRow };
  };
  /** The run produced no output at all: its session is dropped so the retry starts fresh. */
  evictSession: boolean;
  /** System notes consumed by a run that never used them: given back to the next run. */
  restoreNotes: readonly number[];
}

/** One answer block, stored by commitBlock. */
export interface BlockCommit {
  runId: number;
  /** Turns 1..through of the run are answered by this block; 0 when it answers no open turn. */
  through: number;
  /** The reply row, when the block's visible result is not empty or it names files. */
  reply: { content: string; replyTo: BatchRow; files?: readonly ResolvedFile[] } | null;
  /** The block's reported usage, added to the run's session_log row (the daily cost limit reads it). */
  usage?: { input_tokens: number; output_tokens: number; cost_usd: number | null };
  /** The agent compacted its session before this block (counted on session_log.compacted). */
  compacted?: boolean;
}

/** What settling did. */
export interface Settled {
  parked: boolean;
  /** The error reply's outbound id, when the batch was parked. */
  replyId: number | null;
}

/** The queue's statements on one connection. */
export class QueueStore {
  private readonly s: Statements;
  // Made once (better-sqlite3 builds four wrappers per transaction()); hot ones join the group commit.
  private readonly tx;

  /** `maxInputBytes`: most bytes of one message's text handed to an agent (the row keeps all). */
  constructor(
    private readonly db: Db,
    private readonly maxInputBytes = DEFAULT_MAX_INPUT,
  ) {
    this.s = queueSql(db, maxInputBytes);
    this.tx = {
      dispatch: grouped(db, (key: SessionKey, now: number) => this.dispatchIn(key, now)),
      followUps: db.transaction((key: SessionKey, chat: string, now: number) => {
        const p = { group: key.group, topic: key.topic, now, chat };
        return this.usable(this.s.batch.all(p) as BatchRow[]).rows;
      }),
      joinTurn: grouped(db, (runId: number, turn: number, rows: readonly BatchRow[]) =>
        this.joinTurnIn(runId, turn, rows),
      ),
      saveSession: grouped(db, (key: SessionKey, sessionId: string, now: number, runId: number) => {
        this.s.upsertSession.run({ group: key.group, topic: key.topic, id: sessionId, at: isoNow(now) });
        this.s.runSession.run({ id: sessionId, runId });
      }),
      commitBlock: grouped(db, (c: BlockCommit, also?: () => void) => this.commitBlockIn(c, also)),
      takeNotes: db.transaction((key: SessionKey, now: number) => {
        const notes = this.s.notes.all(key.group, key.topic) as Array<{ id: number; content: string }>;
        for (const n of notes) this.s.consumeNote.run(isoNow(now), n.id);
        return notes;
      }),
      settle: grouped(db, (st: Settlement) => this.settleIn(st)),
      recover: db.transaction((now: number, live: ReadonlySet<number>) => this.recoverIn(now, live)),
    };
  }

  /**
   * Rows an agent can be given; the others (a column of the wrong type, written by some program into an
   * older database) end `failed` with their error, alone. Content is cut to the byte bound.
   */
  private usable(rows: BatchRow[]): { rows: BatchRow[]; failed: FailedRow[] } {
    const ok: BatchRow[] = [];
    const failed: FailedRow[] = [];
    for (const r of rows) {
      const error = inboundRowError(r as unknown as Record<string, unknown>);
      if (error) {
        this.s.failRow.run({ id: r.id, error });
        failed.push({ id: r.id, error });
      } else ok.push(Object.assign(r, { content: clipBytes(r.content, this.maxInputBytes) }));
    }
    return { rows: ok, failed };
  }

  /**
   * The lanes to start, in order, fairly across groups (docs/QUEUE.md): first one lane for each group that
   * has no run (`busy` lists the groups that have one), oldest first; then the rest in order of readiness
   * (min ready_at, then min id). A group that floods the queue with sessions therefore never starves
   * another group's chat. `skip`: keys that have a live run.
   *
   * Read as the pump takes them: each `next()` is one indexed query (skipping busy groups' rows inside
   * SQLite) while groups without a run have lanes, then one walk of the ready index for up to `limit` more
   * that stops early. A pump costs what it dispatches, not the backlog (a GROUP BY over all ready rows made
   * every wake O(backlog): 42 % of CPU in a 100k-message burst), nor the lanes it had no time to start
   * (all of them read at each pump, 200 ready groups took 26 % of the main thread while their runs started).
   * Rows may be dispatched between two `next()` calls: a lane taken already is dispatched as nothing.
   */
  laneCursor(now: number, skip: ReadonlySet<string>, limit: number, busy: ReadonlySet<string> = new Set()) {
    return laneCursor(this.s, now, skip, limit, busy);
  }

  /** The next `limit` lanes to start, read at once (laneCursor). */
  nextLanes(now: number, skip: ReadonlySet<string>, limit: number, busy?: ReadonlySet<string>): ReadyLane[] {
    const cursor = this.laneCursor(now, skip, limit, busy);
    const out: ReadyLane[] = [];
    for (let lane = cursor.next(); lane !== undefined; lane = cursor.next()) out.push(lane);
    return out;
  }

  /** Every key with ready rows (eligible or not), in lane order. */
  summaries(now: number): LaneSummary[] {
    const rows = this.s.summary.all({ now }) as Array<LaneSummary & { first_id: number }>;
    return rows.map((r) => ({
      ...r,
      keyId: sessionKeyId(r),
      chat_jid: this.s.chatOf.get(r.first_id) as string,
    }));
  }

  /**
   * Parked rows of a (key, chat) that got a newer message rejoin it, once: back to ready, marked with
   * attempts = `maxFailures` so that failing again parks them for good while the new message is retried
   * alone (a message that crashes the agent every time never holds its chat hostage).
   */
  rejoinParked(maxFailures: number): number {
    // Checked first with a read: the pump runs often, and an UPDATE would take the write lock every time.
    if (this.s.anyParked.get(maxFailures) === undefined) return 0;
    return this.s.rejoin.run({ max: maxFailures }).changes;
  }

  /** Earliest future retry time of any ready row, for the wake-up timer. */
  nextRetry(now: number): number | null {
    return (this.s.nextRetry.get(now) as number | null) ?? null;
  }

  /**
   * Takes the next batch of `key` (every eligible row of the chat of its oldest eligible row) and opens
   * its run: session_log row, rows 'running' with run_id, pending system notes consumed. One transaction.
   */
  dispatch(key: SessionKey, now: number): Dispatched | null {
    return this.tx.dispatch(key, now);
  }

  private dispatchIn(key: SessionKey, now: number): Dispatched | null {
    const p = { group: key.group, topic: key.topic, now };
    const chat = this.s.oldestChat.get(p) as string | undefined;
    if (chat === undefined) return null;
    const { rows, failed } = this.usable(this.s.batch.all({ ...p, chat }) as BatchRow[]);
    if (rows.length === 0)
      return { runId: 0, chatJid: chat, rows, sessionId: null, systemNotes: [], systemNoteIds: [], failed };
    const sessionId = (this.s.session.get(key.group, key.topic) as string | undefined) ?? null;
    const notes = this.s.notes.all(key.group, key.topic) as Array<{ id: number; content: string }>;
    const at = isoNow(now);
    for (const n of notes) this.s.consumeNote.run(at, n.id);
    const runId = Number(
      this.s.openRun.run({ ...p, chat, session: sessionId, at, n: rows.length }).lastInsertRowid,
    );
    // One UPDATE for the batch: the rows the batch statement just read, less the failed ones.
    this.s.joinBatch.run({ ...p, chat, runId });
    return {
      runId,
      chatJid: chat,
      rows,
      sessionId,
      systemNotes: notes.map((n) => n.content),
      systemNoteIds: notes.map((n) => n.id),
      failed,
    };
  }

  /**
   * The oldest eligible row of a chat of `key` other than `chat` (it waits for the key's run to end), or
   * null when none waits.
   */
  otherChatWaiting(key: SessionKey, chat: string, now: number): number | null {
    const id = this.s.otherChat.get({ group: key.group, topic: key.topic, now, chat }) as number | null;
    return id ?? null;
  }

  /** Eligible rows of `key` from `chat`: follow-up candidates for a run serving that chat. */
  followUps(key: SessionKey, chat: string, now: number): BatchRow[] {
    // Asked for every live lane at every pump: a plain read; a transaction (reading again) only for a row
    // that must end 'failed'.
    const rows = this.s.batch.all({ group: key.group, topic: key.topic, now, chat }) as BatchRow[];
    if (rows.some((r) => inboundRowError(r as unknown as Record<string, unknown>) !== null))
      return this.tx.followUps(key, chat, now);
    // Every row checked already: only their content is cut to the byte bound.
    for (const r of rows) r.content = clipBytes(r.content, this.maxInputBytes);
    return rows;
  }

  /**
   * Rows about to be written to a running agent as turn `turn` join it, before the write (a crash after
   * this commit finds them 'running' in a dead run and gives them back). Returns the rows that joined:
   * only rows still 'ready'.
   */
  joinTurn(runId: number, turn: number, rows: readonly BatchRow[]): BatchRow[] {
    return this.tx.joinTurn(runId, turn, rows);
  }

  private joinTurnIn(runId: number, turn: number, rows: readonly BatchRow[]): BatchRow[] {
    if (rows.length === 0) return [];
    const ids = JSON.stringify(rows.map((r) => r.id));
    const took = new Set((this.s.joinTurn.all({ runId, turn, ids }) as { id: number }[]).map((r) => r.id));
    const joined = rows.filter((r) => took.has(r.id));
    if (joined.length > 0) this.s.addMessages.run(joined.length, runId);
    return joined;
  }

  /** The write of turn `turn` failed (the agent was exiting): its rows are ready again, untouched. */
  leaveTurn(runId: number, turn: number): void {
    this.s.leaveTurn.run({ runId, turn });
  }

  /**
   * Stores the agent's session id (a block's newSessionId) for the key and on run `runId`'s session_log
   * row, which has none yet when the run started the session.
   */
  saveSession(key: SessionKey, sessionId: string, now: number, runId: number): void {
    this.tx.saveSession(key, sessionId, now, runId);
  }

  /** The registered group's container settings, if the folder is registered. */
  group(folder: string): GroupRow | undefined {
    return this.s.group.get(folder) as GroupRow | undefined;
  }

  /**
   * THE transaction that stores an agent's answer block: the rows of the turns it answers become 'done'
   * together with its reply row (and session_log.replies + 1), or nothing happens. Whatever else a block
   * makes durable belongs inside this one transaction too: `also` runs in it, after the reply row (the
   * block's actions, an answer going back to a delegating session). Returns the reply's outbound id, if any.
   */
  commitBlock(c: BlockCommit, also?: () => void): number | null {
    return this.tx.commitBlock(c, also);
  }

  private commitBlockIn(c: BlockCommit, also?: () => void): number | null {
    if (c.through > 0) this.s.answerTurns.run({ runId: c.runId, through: c.through });
    if (c.usage) this.s.addUsage.run({ runId: c.runId, ...c.usage });
    if (c.compacted) this.s.addCompacted.run(c.runId);
    let id: number | null = null;
    if (c.reply) {
      const to = c.reply.replyTo;
      id = insertOutbound(this.db, {
        chat_jid: to.chat_jid,
        content: c.reply.content,
        kind: 'reply',
        reply_to_id: to.id,
        reply_to: to.platform_msg_id,
        topic: to.topic,
      });
      if (c.reply.files?.length) insertOutboundFiles(this.db, id, c.reply.files);
      this.s.addReply.run(c.runId);
    }
    also?.();
    return id;
  }

  /**
   * Pending system notes of a key, consumed: they go into the line about to be written (a follow-up turn).
   * Given back with restoreNotes when that write fails. Most turns find none: one read, no transaction.
   */
  takeNotes(key: SessionKey, now: number): Array<{ id: number; content: string }> {
    if (this.s.anyNote.get(key.group, key.topic) === undefined) return [];
    return this.tx.takeNotes(key, now);
  }

  /** Notes taken for a line that was never written are pending again. */
  restoreNotes(ids: readonly number[]): void {
    for (const id of ids) this.s.restoreNote.run(id);
  }

  /** Ends a run: session_log closed and the rows it still holds settled, in one transaction. */
  settle(st: Settlement): Settled {
    return this.tx.settle(st);
  }

  private settleIn(st: Settlement): Settled {
    const runId = st.runId;
    let parked = false;
    let replyId: number | null = null;
    if (st.rows === 'done' || st.rows === 'stopped' || st.rows === 'ready') {
      this.s.allRunning.run({ state: st.rows, runId });
    } else if (st.rows === 'later') this.s.later.run({ runId, notBefore: st.notBefore ?? st.endedAt });
    else if (st.retry) {
      // Per row: rows at the failure limit are parked, the others retried with a backoff.
      const max = st.retry.maxFailures;
      const firstTime = this.s.reachingLimit.get({ runId, max }) as number;
      parked = this.s.parkAtLimit.run({ runId, max }).changes > 0;
      // The highest attempts count among the rows the run still holds, plus this failure.
      const attempt = ((this.s.maxAttempts.get(runId) as number | null) ?? 0) + 1;
      this.s.retry.run({ runId, notBefore: st.retry.notBefore(attempt) });
      if (firstTime > 0) {
        const to = st.retry.parkReply.replyTo;
        replyId = insertOutbound(this.db, {
          chat_jid: to.chat_jid,
          content: st.retry.parkReply.content,
          kind: 'error',
          reply_to_id: to.id,
          reply_to: to.platform_msg_id,
          topic: to.topic,
        });
      }
    }
    if (st.evictSession) this.s.deleteSession.run(st.key.group, st.key.topic);
    for (const id of st.restoreNotes) this.s.restoreNote.run(id);
    this.s.closeRun.run({
      runId,
      at: isoNow(st.endedAt),
      result: st.result,
      error: st.error,
      exitCode: st.exitCode,
      stderrTail: st.stderrTail,
      idleMs: st.idleMs,
    });
    return { parked, replyId };
  }

  /**
   * Startup recovery: runs that never ended (gated died) are closed as interrupted and their rows go back
   * to 'ready', as do 'running' rows that no open run holds. `live` runs (of this process) are left alone.
   */
  recover(now: number, live: ReadonlySet<number>): number {
    return this.tx.recover(now, live);
  }

  private recoverIn(now: number, live: ReadonlySet<number>): number {
    let rows = 0;
    for (const runId of this.s.openRuns.all() as number[]) {
      if (live.has(runId)) continue;
      rows += this.s.requeueRun.run(runId).changes;
      this.s.closeRun.run({
        runId,
        at: isoNow(now),
        result: 'error',
        error: 'interrupted: gated restarted',
        exitCode: null,
        stderrTail: null,
        // How long it worked is not known: it ended with the process that timed it.
        idleMs: null,
      });
    }
    return rows + this.s.orphans.run().changes;
  }
}
