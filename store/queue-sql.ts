import type { Db } from './db.js';

/**
 * The queue's SQL: one prepared statement per operation, named by what it does, made once per connection
 * (store/queue.ts runs them). A row is eligible when state = 'ready' and its backoff (not_before) has
 * passed. Keep `state = 'ready'` and `state = 'running'` literal: SQLite uses a partial index only when the
 * query names its condition exactly.
 */

const ELIGIBLE = `state = 'ready' AND group_folder IS NOT NULL AND (not_before IS NULL OR not_before <= @now)`;
// session_topic is always set on ready rows (the gateway writes '' for the default topic); comparing it
// plainly lets idx_messages_ready serve the whole key and chat instead of walking a chat's history.
const KEY = `group_folder = @group AND session_topic = @topic`;
/**
 * A batch row's columns. The agent gets the text a layer left (agent_content: a stripped prefix) or the
 * stored text, and at most `maxChars` characters of it: a 30 MB row is cut in SQLite, not read whole.
 */
const rowCols = (maxChars: number) =>
  `id, chat_jid, sender, sender_name, substr(coalesce(agent_content, content), 1, ${maxChars}) AS content,
   verb, timestamp, platform_msg_id, topic, coalesce(interrupts, 0) AS interrupts, sender_auth, platform_role,
   transcript,
   EXISTS (SELECT 1 FROM attachments a WHERE a.message_id = messages.id) AS files,
   (SELECT value FROM router_state WHERE key = 'access_version') AS access_version`;
/** Epoch ms now, in SQL: when a row is handed to an agent (dispatched_at). */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;

/** Which lanes are ready and in what order, a batch's rows, and the turns rows join and leave. */
function laneStatements(db: Db, maxChars: number) {
  const ROW_COLS = rowCols(Math.max(1, Math.floor(maxChars)));
  return {
    // A row whose columns cannot be handed to an agent ends here, alone (see inboundRowError).
    failRow: db.prepare(
      `UPDATE messages SET state = 'failed', error = @error WHERE id = @id AND state = 'ready'`,
    ),
    // Rows in readiness order, walked only as far as the next few lanes (idx_messages_ready_walk).
    walk: db.prepare(
      `SELECT group_folder AS "group", coalesce(session_topic, '') AS topic FROM messages
       WHERE ${ELIGIBLE} ORDER BY ready_at, id`,
    ),
    // The oldest lane of any group outside @busy (a JSON array): the index covers every column named, so
    // SQLite skips the rows of busy groups without reading the table.
    firstIdle: db.prepare(
      `SELECT group_folder AS "group", coalesce(session_topic, '') AS topic FROM messages
       WHERE ${ELIGIBLE} AND group_folder NOT IN (SELECT value FROM json_each(@busy))
       ORDER BY ready_at, id LIMIT 1`,
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
    // The chat of the key's oldest eligible row, from the indexes alone: idx_messages_ready holds the key's
    // ready rows with their chat and id, and the few in a backoff come from idx_messages_backoff. Reading
    // not_before from the table instead cost a read of every ready row of the key (one page each).
    oldestChat: db
      .prepare(
        `SELECT chat_jid FROM messages WHERE state = 'ready' AND ${KEY} AND id NOT IN (
           SELECT id FROM messages WHERE state = 'ready' AND not_before IS NOT NULL AND not_before > @now)
         ORDER BY id LIMIT 1`,
      )
      .pluck(),
    // The oldest row of a chat of the key other than @chat (§20: it must not wait for another chat's run).
    otherChat: db
      .prepare(`SELECT min(id) FROM messages WHERE ${ELIGIBLE} AND ${KEY} AND chat_jid <> @chat`)
      .pluck(),
    batch: db.prepare(
      `SELECT ${ROW_COLS} FROM messages WHERE ${ELIGIBLE} AND ${KEY} AND chat_jid = @chat ORDER BY id`,
    ),
    // A row joins a turn only from 'ready': a row is in one turn of one live run at a time. The UPDATE that
    // hands rows to an agent stamps them (dispatched_at) itself: a trigger doing it rewrote each row again.
    joinTurn: db.prepare(
      `UPDATE messages SET state = 'running', run_id = @runId, turn = @turn, dispatched_at = ${NOW_MS}
       WHERE id IN (SELECT value FROM json_each(@ids)) AND state = 'ready' RETURNING id`,
    ),
    // A dispatch's whole batch joins turn 1 at once: the rows the batch statement just read, in the same
    // transaction (rows that failed there are no longer 'ready').
    joinBatch: db.prepare(
      `UPDATE messages SET state = 'running', run_id = @runId, turn = 1, dispatched_at = ${NOW_MS}
       WHERE ${ELIGIBLE} AND ${KEY} AND chat_jid = @chat`,
    ),
    leaveTurn: db.prepare(
      `UPDATE messages SET state = 'ready' WHERE run_id = @runId AND turn = @turn AND state = 'running'`,
    ),
    answerTurns: db.prepare(
      `UPDATE messages SET state = 'done' WHERE run_id = @runId AND state = 'running' AND turn <= @through`,
    ),
  };
}

/** A key's agent session, and the system notes waiting for its next run. */
function sessionStatements(db: Db) {
  return {
    session: db.prepare(`SELECT session_id FROM sessions WHERE group_folder = ? AND topic = ?`).pluck(),
    upsertSession: db.prepare(
      `INSERT INTO sessions (group_folder, topic, session_id, updated_at) VALUES (@group, @topic, @id, @at)
       ON CONFLICT (group_folder, topic) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at`,
    ),
    // The run's own row names the session it served: empty at its start on a key's first run (or a fork).
    runSession: db.prepare(
      `UPDATE session_log SET session_id = @id WHERE id = @runId AND session_id IS NOT @id`,
    ),
    deleteSession: db.prepare(`DELETE FROM sessions WHERE group_folder = ? AND topic = ?`),
    notes: db.prepare(
      `SELECT id, content FROM system_messages WHERE group_folder = ? AND topic = ? AND consumed_at IS NULL ORDER BY id`,
    ),
    anyNote: db
      .prepare(
        `SELECT 1 FROM system_messages WHERE group_folder = ? AND topic = ? AND consumed_at IS NULL LIMIT 1`,
      )
      .pluck(),
    consumeNote: db.prepare(`UPDATE system_messages SET consumed_at = ? WHERE id = ?`),
    restoreNote: db.prepare(`UPDATE system_messages SET consumed_at = NULL WHERE id = ?`),
  };
}

/** A run's session_log row, what its end does to its rows, parking, and recovery after a restart. */
function runStatements(db: Db) {
  return {
    openRun: db.prepare(
      `INSERT INTO session_log (group_folder, topic, chat_jid, session_id, started_at, messages)
       VALUES (@group, @topic, @chat, @session, @at, @n)`,
    ),
    addMessages: db.prepare(`UPDATE session_log SET messages = messages + ? WHERE id = ?`),
    addReply: db.prepare(`UPDATE session_log SET replies = replies + 1 WHERE id = ?`),
    addCompacted: db.prepare(`UPDATE session_log SET compacted = coalesce(compacted, 0) + 1 WHERE id = ?`),
    addUsage: db.prepare(
      `UPDATE session_log SET input_tokens = coalesce(input_tokens, 0) + @input_tokens,
         output_tokens = coalesce(output_tokens, 0) + @output_tokens,
         cost_usd = coalesce(cost_usd, 0) + coalesce(@cost_usd, 0)
       WHERE id = @runId`,
    ),
    allRunning: db.prepare(`UPDATE messages SET state = @state WHERE run_id = @runId AND state = 'running'`),
    retry: db.prepare(
      `UPDATE messages SET state = 'ready', attempts = attempts + 1, not_before = @notBefore
       WHERE run_id = @runId AND state = 'running'`,
    ),
    // The engine was unreachable: back as they were (attempts unchanged), after the outage backoff.
    later: db.prepare(
      `UPDATE messages SET state = 'ready', not_before = @notBefore WHERE run_id = @runId AND state = 'running'`,
    ),
    maxAttempts: db
      .prepare(`SELECT max(attempts) FROM messages WHERE run_id = ? AND state = 'running'`)
      .pluck(),
    closeRun: db.prepare(
      `UPDATE session_log SET ended_at = @at, result = @result, error = @error, exit_code = @exitCode,
              stderr_tail = @stderrTail, idle_ms = @idleMs WHERE id = @runId`,
    ),
    // A parked row rejoins once, with a new message (attempts 0) of its chat; it comes back marked with
    // attempts = @max, so a run that fails with it again parks it for good and retries the others alone.
    rejoin: db.prepare(
      `UPDATE messages SET state = 'ready', attempts = @max, not_before = NULL
       WHERE state = 'parked' AND attempts < @max AND EXISTS (
         SELECT 1 FROM messages n WHERE n.state = 'ready' AND n.group_folder = messages.group_folder
           AND coalesce(n.session_topic, '') = coalesce(messages.session_topic, '')
           AND n.chat_jid = messages.chat_jid AND n.id > messages.id AND n.attempts = 0)`,
    ),
    // Rows of a failed run at the failure limit: parked. Those reaching it for the first time are counted
    // first (they earn the chat its one notice); rows back from a rejoin are past it and park silently.
    reachingLimit: db
      .prepare(
        `SELECT count(*) FROM messages WHERE run_id = @runId AND state = 'running' AND attempts + 1 = @max`,
      )
      .pluck(),
    parkAtLimit: db.prepare(
      `UPDATE messages SET state = 'parked' WHERE run_id = @runId AND state = 'running' AND attempts + 1 >= @max`,
    ),
    anyParked: db.prepare(`SELECT 1 FROM messages WHERE state = 'parked' AND attempts < ? LIMIT 1`).pluck(),
    nextRetry: db
      .prepare(`SELECT min(not_before) FROM messages WHERE state = 'ready' AND not_before > ?`) // idx_messages_backoff
      .pluck(),
    group: db.prepare(
      `SELECT image, network, mounts, busy, agent, model,
         EXISTS (SELECT 1 FROM group_repos r WHERE r.group_folder = registered_groups.folder) AS repo
       FROM registered_groups WHERE folder = ?`,
    ),
    openRuns: db.prepare(`SELECT id FROM session_log WHERE result IS NULL`).pluck(),
    requeueRun: db.prepare(`UPDATE messages SET state = 'ready' WHERE run_id = ? AND state = 'running'`),
    orphans: db.prepare(
      `UPDATE messages SET state = 'ready' WHERE state = 'running'
       AND (run_id IS NULL OR run_id IN (SELECT id FROM session_log WHERE result IS NOT NULL))`,
    ),
  };
}

function prepare(db: Db, maxChars: number) {
  return { ...laneStatements(db, maxChars), ...sessionStatements(db), ...runStatements(db) };
}

/** The prepared statements, by operation. */
export type Statements = ReturnType<typeof prepare>;
const cache = new WeakMap<Db, Map<number, Statements>>();

/** Default bound on the characters of one message handed to an agent (GATED_MAX_INPUT_BYTES). */
export const DEFAULT_MAX_INPUT = 256 * 1024;

/** The queue's statements on `db`, prepared on first use (per bound on a message's characters). */
export function queueSql(db: Db, maxChars = DEFAULT_MAX_INPUT): Statements {
  let byMax = cache.get(db);
  if (!byMax) cache.set(db, (byMax = new Map()));
  let s = byMax.get(maxChars);
  if (!s) byMax.set(maxChars, (s = prepare(db, maxChars)));
  return s;
}
