import { isoNow, sessionKeyId, type SessionKey } from '../core/types.js';
import type { Db } from '../store/db.js';
import { insertOutbound } from '../store/messages.js';
import type { AgentMessage } from './prompt.js';

/**
 * The queue's view of the database: lanes, batches, sessions, session_log. Statements are prepared once per
 * connection; every multi-row change is one synchronous transaction that never spans an await.
 *
 * A row is eligible when state = 'ready' and its backoff (not_before) has passed. Topics are compared with
 * NULL read as '' (the default topic), whoever wrote the row.
 */

/** One message of a batch: what the agent receives, plus where a reply to it goes. */
export interface BatchRow extends AgentMessage {
  chat_jid: string;
  /** The inbound topic (platform thread), for the reply row. */
  topic: string;
}

/** A key with ready rows, in lane order. */
export interface ReadyLane {
  group: string;
  topic: string;
}

/** Ready rows of one key, summarized (snapshot, facts). */
export interface LaneSummary extends ReadyLane {
  /** All ready rows, eligible or in backoff. */
  ready: number;
  eligible: number;
  /** The chat of the oldest ready row. */
  chat_jid: string;
  ready_at: number;
  /** Earliest not_before among rows not yet eligible. */
  next_retry: number | null;
}

/** What one dispatch wrote. */
export interface Dispatched {
  runId: number;
  chatJid: string;
  rows: BatchRow[];
  sessionId: string | null;
  systemNotes: string[];
  systemNoteIds: number[];
}

/** registered_groups fields a runtime needs. */
export interface GroupRow {
  image: string | null;
  network: number;
  mounts: string | null;
}

/** How a finished run's session_log row is closed and the rows it still holds ('running') are settled. */
export interface Settlement {
  runId: number;
  key: SessionKey;
  result: 'ok' | 'error' | 'timeout' | 'stopped';
  error: string | null;
  exitCode: number | null;
  stderrTail: string | null;
  endedAt: number;
  /**
   * done: answered (clean exit); stopped: /stop; ready: back as they were (shutdown); retry: a failure,
   * attempts + 1 and a backoff, or parked with one error reply once `maxFailures` is reached.
   */
  rows: 'done' | 'stopped' | 'ready' | 'retry';
  /** With rows = 'done': follow-ups the agent never answered go back to 'ready' instead. */
  unanswered: readonly number[];
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

/** What settling did. */
export interface Settled {
  parked: boolean;
  /** The error reply's outbound id, when the batch was parked. */
  replyId: number | null;
}

const ELIGIBLE = `state = 'ready' AND group_folder IS NOT NULL AND (not_before IS NULL OR not_before <= @now)`;
// session_topic is always set on ready rows (the gateway writes '' for the default topic); comparing it
// plainly lets idx_messages_ready serve the whole key and chat instead of walking a chat's history.
const KEY = `group_folder = @group AND session_topic = @topic`;
const ROW_COLS = `id, chat_jid, sender, sender_name, content, verb, timestamp, platform_msg_id, topic`;

function prepare(db: Db) {
  return {
    // Rows in readiness order, walked only as far as the next few lanes (idx_messages_ready_order).
    walk: db.prepare(
      `SELECT group_folder AS "group", coalesce(session_topic, '') AS topic FROM messages
       WHERE ${ELIGIBLE} ORDER BY ready_at, id`,
    ),
    summary: db.prepare(
      `SELECT group_folder AS "group", coalesce(session_topic, '') AS topic, count(*) AS ready,
              sum(not_before IS NULL OR not_before <= @now) AS eligible,
              min(coalesce(ready_at, 0)) AS ready_at, min(id) AS first_id,
              min(CASE WHEN not_before > @now THEN not_before END) AS next_retry
       FROM messages WHERE state = 'ready' AND group_folder IS NOT NULL
       GROUP BY group_folder, coalesce(session_topic, '') ORDER BY ready_at, first_id`,
    ),
    chatOf: db.prepare(`SELECT chat_jid FROM messages WHERE id = ?`).pluck(),
    oldestChat: db
      .prepare(`SELECT chat_jid FROM messages WHERE ${ELIGIBLE} AND ${KEY} ORDER BY id LIMIT 1`)
      .pluck(),
    batch: db.prepare(
      `SELECT ${ROW_COLS} FROM messages WHERE ${ELIGIBLE} AND ${KEY} AND chat_jid = @chat ORDER BY id`,
    ),
    markRunning: db.prepare(
      `UPDATE messages SET state = 'running', run_id = @runId WHERE id = @id AND state = 'ready'`,
    ),
    session: db.prepare(`SELECT session_id FROM sessions WHERE group_folder = ? AND topic = ?`).pluck(),
    upsertSession: db.prepare(
      `INSERT INTO sessions (group_folder, topic, session_id, updated_at) VALUES (@group, @topic, @id, @at)
       ON CONFLICT (group_folder, topic) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at`,
    ),
    deleteSession: db.prepare(`DELETE FROM sessions WHERE group_folder = ? AND topic = ?`),
    notes: db.prepare(
      `SELECT id, content FROM system_messages WHERE group_folder = ? AND topic = ? AND consumed_at IS NULL ORDER BY id`,
    ),
    consumeNote: db.prepare(`UPDATE system_messages SET consumed_at = ? WHERE id = ?`),
    restoreNote: db.prepare(`UPDATE system_messages SET consumed_at = NULL WHERE id = ?`),
    openRun: db.prepare(
      `INSERT INTO session_log (group_folder, topic, chat_jid, session_id, started_at, messages)
       VALUES (@group, @topic, @chat, @session, @at, @n)`,
    ),
    addMessages: db.prepare(`UPDATE session_log SET messages = messages + ? WHERE id = ?`),
    addReply: db.prepare(`UPDATE session_log SET replies = replies + 1 WHERE id = ?`),
    setState: db.prepare(
      `UPDATE messages SET state = @state WHERE id = @id AND run_id = @runId AND state = 'running'`,
    ),
    allRunning: db.prepare(`UPDATE messages SET state = @state WHERE run_id = @runId AND state = 'running'`),
    retry: db.prepare(
      `UPDATE messages SET state = 'ready', attempts = attempts + 1, not_before = @notBefore
       WHERE run_id = @runId AND state = 'running'`,
    ),
    maxAttempts: db
      .prepare(`SELECT max(attempts) FROM messages WHERE run_id = ? AND state = 'running'`)
      .pluck(),
    closeRun: db.prepare(
      `UPDATE session_log SET ended_at = @at, result = @result, error = @error, exit_code = @exitCode,
              stderr_tail = @stderrTail WHERE id = @runId`,
    ),
    rejoin: db.prepare(
      `UPDATE messages SET state = 'ready', attempts = 0, not_before = NULL
       WHERE state = 'parked' AND EXISTS (
         SELECT 1 FROM messages n WHERE n.state = 'ready' AND n.group_folder = messages.group_folder
           AND coalesce(n.session_topic, '') = coalesce(messages.session_topic, '')
           AND n.chat_jid = messages.chat_jid AND n.id > messages.id)`,
    ),
    anyParked: db.prepare(`SELECT 1 FROM messages WHERE state = 'parked' LIMIT 1`).pluck(),
    nextRetry: db
      .prepare(`SELECT min(not_before) FROM messages WHERE state = 'ready' AND not_before > ?`) // idx_messages_retry
      .pluck(),
    group: db.prepare(`SELECT image, network, mounts FROM registered_groups WHERE folder = ?`),
    openRuns: db.prepare(`SELECT id FROM session_log WHERE result IS NULL`).pluck(),
    requeueRun: db.prepare(`UPDATE messages SET state = 'ready' WHERE run_id = ? AND state = 'running'`),
    orphans: db.prepare(
      `UPDATE messages SET state = 'ready' WHERE state = 'running'
       AND (run_id IS NULL OR run_id IN (SELECT id FROM session_log WHERE result IS NOT NULL))`,
    ),
  };
}

type Statements = ReturnType<typeof prepare>;
const cache = new WeakMap<Db, Statements>();

/** The queue's statements on one connection. */
export class QueueStore {
  private readonly s: Statements;

  constructor(private readonly db: Db) {
    let s = cache.get(db);
    if (!s) cache.set(db, (s = prepare(db)));
    this.s = s;
  }

  /** Keys with eligible rows, in the order they became ready (min ready_at, then min id). */
  /**
   * The first `limit` lanes in readiness order whose key is not in `skip` (the running ones). Walks the
   * ready index and stops early, so a pump costs what it dispatches, not the size of the backlog (a
   * GROUP BY over all ready rows made every wake O(backlog): 42 % of CPU in a 100k-message burst).
   */
  nextLanes(now: number, skip: ReadonlySet<string>, limit: number): ReadyLane[] {
    const out: ReadyLane[] = [];
    if (limit <= 0) return out;
    const seen = new Set(skip);
    for (const lane of this.s.walk.iterate({ now }) as Iterable<ReadyLane>) {
      const id = sessionKeyId(lane);
      if (seen.has(id)) continue;
      seen.add(id);
      out.push(lane);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Every key with ready rows (eligible or not), in lane order. */
  summaries(now: number): LaneSummary[] {
    const rows = this.s.summary.all({ now }) as Array<LaneSummary & { first_id: number }>;
    return rows.map((r) => ({ ...r, chat_jid: this.s.chatOf.get(r.first_id) as string }));
  }

  /** Parked rows of a (key, chat) that got a newer ready row rejoin it: back to ready, attempts 0. */
  rejoinParked(): number {
    // Checked first with a read: the pump runs often, and an UPDATE would take the write lock every time.
    if (this.s.anyParked.get() === undefined) return 0;
    return this.s.rejoin.run().changes;
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
    return this.db.transaction((): Dispatched | null => {
      const p = { group: key.group, topic: key.topic, now };
      const chat = this.s.oldestChat.get(p) as string | undefined;
      if (chat === undefined) return null;
      const rows = this.s.batch.all({ ...p, chat }) as BatchRow[];
      const sessionId = (this.s.session.get(key.group, key.topic) as string | undefined) ?? null;
      const notes = this.s.notes.all(key.group, key.topic) as Array<{ id: number; content: string }>;
      const at = isoNow(now);
      for (const n of notes) this.s.consumeNote.run(at, n.id);
      const runId = Number(
        this.s.openRun.run({ ...p, chat, session: sessionId, at, n: rows.length }).lastInsertRowid,
      );
      for (const r of rows) this.s.markRunning.run({ runId, id: r.id });
      return {
        runId,
        chatJid: chat,
        rows,
        sessionId,
        systemNotes: notes.map((n) => n.content),
        systemNoteIds: notes.map((n) => n.id),
      };
    })();
  }

  /** Eligible rows of `key` from `chat`: follow-up candidates for a run serving that chat. */
  followUps(key: SessionKey, chat: string, now: number): BatchRow[] {
    return this.s.batch.all({ group: key.group, topic: key.topic, now, chat }) as BatchRow[];
  }

  /** Rows just written to a running agent's stdin join its run. */
  joinRun(runId: number, ids: readonly number[]): void {
    this.db.transaction(() => {
      for (const id of ids) this.s.markRunning.run({ runId, id });
      this.s.addMessages.run(ids.length, runId);
    })();
  }

  /** Stores the agent's session id for the key (a block's newSessionId). */
  saveSession(key: SessionKey, sessionId: string, now: number): void {
    this.s.upsertSession.run({ group: key.group, topic: key.topic, id: sessionId, at: isoNow(now) });
  }

  /** Drops the key's session: the next run starts fresh. */
  deleteSession(key: SessionKey): void {
    this.s.deleteSession.run(key.group, key.topic);
  }

  /** The registered group's container settings, if the folder is registered. */
  group(folder: string): GroupRow | undefined {
    return this.s.group.get(folder) as GroupRow | undefined;
  }

  /**
   * A reply and the marking of its batch commit together: the outbound row, every row of the run still
   * 'running' → 'done', session_log.replies + 1. Returns the outbound id.
   */
  commitReply(runId: number, content: string, replyTo: BatchRow): number {
    return this.db.transaction(() => {
      const id = insertOutbound(this.db, {
        chat_jid: replyTo.chat_jid,
        content,
        kind: 'reply',
        reply_to_id: replyTo.id,
        reply_to: replyTo.platform_msg_id,
        topic: replyTo.topic,
      });
      this.s.allRunning.run({ state: 'done', runId });
      this.s.addReply.run(runId);
      return id;
    })();
  }

  /** Highest attempts count among the rows a run still holds. */
  maxAttempts(runId: number): number {
    return (this.s.maxAttempts.get(runId) as number | null) ?? 0;
  }

  /** Ends a run: session_log closed and the rows it still holds settled, in one transaction. */
  settle(st: Settlement): Settled {
    return this.db.transaction((): Settled => {
      const runId = st.runId;
      let parked = false;
      let replyId: number | null = null;
      if (st.rows === 'done') {
        for (const id of st.unanswered) this.s.setState.run({ state: 'ready', id, runId });
        this.s.allRunning.run({ state: 'done', runId });
      } else if (st.rows === 'stopped' || st.rows === 'ready') {
        this.s.allRunning.run({ state: st.rows, runId });
      } else if (st.retry) {
        const attempt = this.maxAttempts(runId) + 1;
        if (attempt >= st.retry.maxFailures) {
          parked = true;
          this.s.allRunning.run({ state: 'parked', runId });
          const to = st.retry.parkReply.replyTo;
          replyId = insertOutbound(this.db, {
            chat_jid: to.chat_jid,
            content: st.retry.parkReply.content,
            kind: 'error',
            reply_to_id: to.id,
            reply_to: to.platform_msg_id,
            topic: to.topic,
          });
        } else {
          this.s.retry.run({ runId, notBefore: st.retry.notBefore(attempt) });
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
      });
      return { parked, replyId };
    })();
  }

  /**
   * Startup recovery: runs that never ended (gated died) are closed as interrupted and their rows go back
   * to 'ready', as do 'running' rows that no open run holds. `live` runs (of this process) are left alone.
   */
  recover(now: number, live: ReadonlySet<number>): number {
    return this.db.transaction(() => {
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
        });
      }
      return rows + this.s.orphans.run().changes;
    })();
  }
}
