import type { RouteRow } from '../router/index.js';
import { CHAT_COLUMNS, type ChatFile, type ChatRow } from '../channels/web/index.js';
import { busyModeOf, type BusyMode } from '../core/types.js';
import type { Db } from '../store/db.js';

/** A registered group as the chat and dashboard list it. */
export interface GroupRow {
  folder: string;
  name: string | null;
  added_at: string;
  /** What a message does while the group's agent works on a turn: queue, steer or interrupt. */
  busy: BusyMode;
}

/** A routes row with its hit count (route_hits). */
export interface RouteHitRow extends RouteRow {
  hits: number;
  last_hit_at: string | null;
}

/** One session_log row. */
export interface RunRow {
  id: number;
  group_folder: string;
  topic: string;
  chat_jid: string | null;
  started_at: string;
  ended_at: string | null;
  result: string | null;
  error: string | null;
  messages: number;
  replies: number;
  /** What the agent reported it used (null: it reported nothing). */
  input_tokens: number | null;
  output_tokens: number | null;
  cost_usd: number | null;
  /** Milliseconds the agent sat idle waiting for a follow-up (null: not known, or the run is open). */
  idle_ms: number | null;
  /** Agent start → exit minus idle_ms: the time the agent worked (null: open, or its idle time unknown). */
  work_ms: number | null;
  /** Agent start → exit (null: still open). */
  duration_ms: number | null;
}

/** How a run's time splits: its lifetime (start → exit), the part spent idle, and the rest, work. */
export interface RunSplit {
  duration_ms: number | null;
  idle_ms: number | null;
  work_ms: number | null;
}

/** The split of a session_log row's time (docs/WEB.md, "Runs: work and idle"). */
export function runSplit(startedAt: string, endedAt: string | null, idleMs: number | null): RunSplit {
  const start = Date.parse(startedAt);
  const end = endedAt === null ? NaN : Date.parse(endedAt);
  const duration = Number.isFinite(start) && Number.isFinite(end) ? Math.max(0, end - start) : null;
  const idle = duration === null || idleMs === null ? null : Math.min(idleMs, duration);
  return { duration_ms: duration, idle_ms: idle, work_ms: idle === null ? null : duration! - idle };
}

/** An outbound row not (yet) delivered: pending or failed. Content is cut to a preview. */
export interface OutboxView {
  id: number;
  chat_jid: string;
  topic: string;
  kind: string | null;
  preview: string;
  delivery: 'pending' | 'failed';
  delivery_attempts: number;
  delivery_error: string | null;
  parts_sent: number;
  timestamp: string;
}

const CHAT_COLS = CHAT_COLUMNS;

/** Where one file of a chat row lies, as the file endpoint needs it. */
export interface ChatFileRow {
  chat_jid: string;
  name: string;
  mime: string | null;
  /** outbound_files.abs_path (absolute), or attachments.path (relative to `group_folder`). */
  path: string | null;
  /** The folder the path was checked against: the inbound row's group, or the group a reply answers. */
  group_folder: string | null;
  /** The row's sender, and whether gated wrote it, and the platform id it answers: who may see it. */
  sender: string;
  is_from_me: number;
  reply_to: string | null;
}

// A chat row one web sender may see when it may not read the whole chat: its own posts and the answers to
// them (a reply's reply_to is the post's platform id, `<sender>-<clientMsgId>`). @who NULL: every row.
const SEEN_BY = `(@who IS NULL OR (is_from_me = 0 AND sender = @who)
  OR (is_from_me = 1 AND substr(reply_to, 1, length(@who) + 1) = @who || '-'))`;

/** Parameters of a chat page: `who` limits it to one web sender's own rows (null: all rows). */
interface ChatPage {
  jid: string;
  topic: string;
  id: number;
  limit: number;
  who: string | null;
}

interface FileListRow {
  message_id: number;
  seq: number;
  name: string;
  mime: string | null;
  size: number | null;
  ready: number;
}

/**
 * The dashboard's and the chat's reads, prepared once per connection. Every
 * read is one statement, so a page never sees half of a gateway transaction.
 */
export class Queries {
  private readonly s;

  constructor(readonly db: Db) {
    this.s = {
      groups: db.prepare<[], GroupRow>(
        `SELECT folder, name, added_at, busy FROM registered_groups ORDER BY folder`,
      ),
      group: db.prepare<[string], { folder: string }>(
        `SELECT folder FROM registered_groups WHERE folder = ?`,
      ),
      chatTail: db.prepare<[ChatPage], ChatRow>(
        `SELECT * FROM (SELECT ${CHAT_COLS} FROM messages
           WHERE chat_jid = @jid AND topic = @topic AND id < @id AND ${SEEN_BY}
           ORDER BY id DESC LIMIT @limit) ORDER BY id`,
      ),
      chatAfter: db.prepare<[ChatPage], ChatRow>(
        `SELECT ${CHAT_COLS} FROM messages WHERE chat_jid = @jid AND topic = @topic AND id > @id AND ${SEEN_BY}
           ORDER BY id LIMIT @limit`,
      ),
      routes: db.prepare<[], RouteHitRow>(
        `SELECT r.id, r.seq, r.match, r.target, r.impulse_config,
                coalesce(h.hits, 0) AS hits, h.last_hit_at
           FROM routes r LEFT JOIN route_hits h ON h.route_id = r.id ORDER BY r.seq, r.id`,
      ),
      runs: db.prepare<[number], Omit<RunRow, keyof RunSplit> & { idle_ms: number | null }>(
        `SELECT id, group_folder, topic, chat_jid, started_at, ended_at, result, error, messages, replies,
                input_tokens, output_tokens, cost_usd, idle_ms
           FROM session_log ORDER BY id DESC LIMIT ?`,
      ),
      outbox: db.prepare<[number], OutboxView>(
        // Each state from its own partial index (the pending ones named: for the ORDER BY the planner would
        // rather read the table backwards): with `delivery IN (…)` no index applied, and the table was read
        // from its newest row until enough were found, all of it when few replies are undelivered.
        `SELECT * FROM (
           SELECT id, chat_jid, topic, kind, substr(content, 1, 200) AS preview, delivery, delivery_attempts,
                  delivery_error, parts_sent, timestamp
             FROM messages INDEXED BY idx_messages_outbox WHERE is_from_me = 1 AND delivery = 'pending'
           UNION ALL
           SELECT id, chat_jid, topic, kind, substr(content, 1, 200) AS preview, delivery, delivery_attempts,
                  delivery_error, parts_sent, timestamp
             FROM messages WHERE is_from_me = 1 AND delivery = 'failed')
         ORDER BY id DESC LIMIT ?`,
      ),
      // The files of chat rows with ids in a range: the rows' own attachments and the replies' files.
      filesIn: db.prepare<[number, number, number, number], FileListRow>(
        `SELECT message_id, seq, name, mime, size, state = 'saved' AS ready FROM attachments
           WHERE message_id BETWEEN ? AND ?
         UNION ALL
         SELECT message_id, seq, name, mime, NULL, 1 FROM outbound_files
           WHERE message_id BETWEEN ? AND ? AND state = 'ok' AND abs_path IS NOT NULL
         ORDER BY message_id, seq`,
      ),
      inboundFile: db.prepare<[number, number], ChatFileRow>(
        `SELECT m.chat_jid, a.name, a.mime, a.path, m.group_folder, m.sender, m.is_from_me, m.reply_to
           FROM attachments a
           JOIN messages m ON m.id = a.message_id
          WHERE a.message_id = ? AND a.seq = ? AND m.is_from_me = 0 AND a.state = 'saved'`,
      ),
      outboundFile: db.prepare<[number, number], ChatFileRow>(
        `SELECT m.chat_jid, f.name, f.mime, f.abs_path AS path,
                (SELECT q.group_folder FROM messages q WHERE q.id = m.reply_to_id) AS group_folder,
                m.sender, m.is_from_me, m.reply_to
           FROM outbound_files f JOIN messages m ON m.id = f.message_id
          WHERE f.message_id = ? AND f.seq = ? AND m.is_from_me = 1 AND f.state = 'ok'`,
      ),
      fromMe: db.prepare<[number], number>(`SELECT is_from_me FROM messages WHERE id = ?`).pluck(),
      // The other chats of a session's recent runs (idx_session_log_key): who else the agent talks to.
      sharedChats: db
        .prepare<[string, string, string], string>(
          `SELECT DISTINCT chat_jid FROM (SELECT chat_jid FROM session_log
             WHERE group_folder = ? AND topic = ? ORDER BY id DESC LIMIT 100)
           WHERE chat_jid IS NOT NULL AND chat_jid != ? ORDER BY chat_jid LIMIT 20`,
        )
        .pluck(),
      // Reads the newest page of messages: a damaged file fails here, not only on the next write.
      ping: db.prepare<[], { ok: number }>(`SELECT 1 AS ok FROM (SELECT max(id) FROM messages)`),
    };
  }

  /** Registered groups by folder. */
  groups(): GroupRow[] {
    // A value written with sqlite3 that names no mode is shown as what it does: queue.
    return this.s.groups.all().map((g) => ({ ...g, busy: busyModeOf(g.busy) }));
  }

  /**
   * The chats other than `jid` that the session (folder, topic) served in its last 100 runs: a session is
   * (group, topic), so they share the agent's memory with `jid`.
   */
  sharedChats(folder: string, topic: string, jid: string): string[] {
    return this.s.sharedChats.all(folder, topic, jid);
  }

  /** True when `folder` is a registered group. */
  hasGroup(folder: string): boolean {
    return this.s.group.get(folder) !== undefined;
  }

  /**
   * The last `limit` rows of a chat topic before row `beforeId` (inbound and outbound), oldest first; with
   * `who`, only that web sender's own posts and the answers to them.
   */
  chatTail(
    chatJid: string,
    topic: string,
    beforeId: number,
    limit: number,
    who: string | null = null,
  ): ChatRow[] {
    return this.s.chatTail.all({ jid: chatJid, topic, id: beforeId, limit, who });
  }

  /** Up to `limit` rows of a chat topic after row `afterId`, oldest first (SSE replay); `who` as chatTail. */
  chatAfter(
    chatJid: string,
    topic: string,
    afterId: number,
    limit: number,
    who: string | null = null,
  ): ChatRow[] {
    return this.s.chatAfter.all({ jid: chatJid, topic, id: afterId, limit, who });
  }

  /** The files of the given chat rows, by row id (rows without files are absent). */
  chatFiles(ids: readonly number[]): Map<number, ChatFile[]> {
    const out = new Map<number, ChatFile[]>();
    if (ids.length === 0) return out;
    const wanted = new Set(ids);
    const lo = Math.min(...ids);
    const hi = Math.max(...ids);
    for (const f of this.s.filesIn.all(lo, hi, lo, hi)) {
      if (!wanted.has(f.message_id)) continue;
      let list = out.get(f.message_id);
      if (!list) out.set(f.message_id, (list = []));
      list.push({
        seq: f.seq,
        name: f.name,
        mime: f.mime ?? 'application/octet-stream',
        size: f.size,
        ready: f.ready === 1,
      });
    }
    return out;
  }

  /** One file of a chat row (an inbound row's saved attachment or a reply's file), or undefined. */
  chatFile(messageId: number, seq: number): ChatFileRow | undefined {
    const fromMe = this.s.fromMe.get(messageId);
    if (fromMe === undefined) return undefined;
    return fromMe ? this.s.outboundFile.get(messageId, seq) : this.s.inboundFile.get(messageId, seq);
  }

  /** Every route in (seq, id) order with its stored hit count. */
  routes(): RouteHitRow[] {
    return this.s.routes.all();
  }

  /** The newest `limit` session_log rows, newest first. */
  recentRuns(limit: number): RunRow[] {
    return this.s.runs.all(limit).map((r) => ({ ...r, ...runSplit(r.started_at, r.ended_at, r.idle_ms) }));
  }

  /** The newest `limit` pending or failed outbound rows, newest first. */
  outbox(limit: number): OutboxView[] {
    return this.s.outbox.all(limit);
  }

  /** Throws when the database does not answer. */
  ping(): void {
    if (this.s.ping.get()?.ok !== 1) throw new Error('SELECT 1 returned nothing');
  }
}
