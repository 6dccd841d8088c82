import type { Db } from '../store/db.js';
import { runSplit, type RunSplit } from './queries.js';

/**
 * The reads behind the dashboard's chat and run views. Statements are prepared once per shape; every read
 * is one statement, so a view never shows half of a gateway transaction. Columns other parts of gated add
 * to `messages` or `session_log` (attachments, usage, …) are passed through as they are, so the views show
 * them without knowing them.
 */

/** One tool call of a run as the run view shows it: times are ms after the run started. */
export interface RunToolCall {
  id: number;
  seq: number | null;
  turn: number | null;
  tool: string;
  input: string;
  decision: string | null;
  decided_by: string | null;
  at_ms: number;
  waited_ms: number | null;
  duration_ms: number | null;
  output_bytes: number | null;
  error: string | null;
}

/** At most this many rows in one response (the pages ask for the next page with `before`). */
export const MAX_PAGE = 500;
/** Characters of a message's content a listing carries; `content_length` says how long the whole is. */
export const CONTENT_PREVIEW = 4000;

/** One chat as the chat list shows it. */
export interface ChatSummary {
  chat_jid: string;
  messages: number;
  last_id: number;
  last_at: string;
}

/** One message of a chat view: the messages row (content cut to a preview) plus its run's facts. */
export type ChatMessage = Record<string, unknown> & {
  id: number;
  chat_jid: string;
  is_from_me: number;
  content: string;
  content_length: number;
  /** The run that had this row (inbound) or wrote it (outbound, through the row it answers). */
  answered_by: number | null;
  run_result: string | null;
};

/** An audio file of a chat row (a voice message, a spoken reply): played by the dashboard beside its text. */
export interface ChatAudio {
  message_id: number;
  seq: number;
  name: string;
  mime: string;
}

/** A run with its messages and derived timings. */
export interface RunView {
  run: Record<string, unknown> & { id: number; started_at: string; ended_at: string | null };
  messages: ChatMessage[];
  /** The run's tool calls in the order they were asked: the timeline, each with its turn (docs/SECURITY.md). */
  tool_calls: RunToolCall[];
  timings: RunSplit & {
    /** Dispatch to the first reply stored. */
    first_reply_ms: number | null;
    /** Per inbound row: arrival to hand-over to the agent. */
    queue_ms: Array<{ id: number; ms: number | null }>;
  };
}

/** Filters of a chat page. */
export interface ChatQuery {
  chatJid: string;
  /** Text the content must contain (case-insensitive for ASCII). */
  text?: string | undefined;
  /** Text the sender id or name must contain. */
  sender?: string | undefined;
  /** Only rows with a smaller id (the next page back). */
  before?: number | undefined;
  limit: number;
}

const BASE_COLUMNS = new Set(['content']);

/** `%text%` for LIKE with the wildcards in `text` taken literally. */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** Chat list, chat pages and run views over one connection. */
export class Inspect {
  private readonly columns: string;
  private readonly chatStmts = new Map<string, ReturnType<Db['prepare']>>();
  private readonly s;

  constructor(private readonly db: Db) {
    const cols = (db.prepare(`PRAGMA table_info(messages)`).all() as { name: string }[]).map((c) => c.name);
    // Every column, the content cut to a preview: a 64 KiB message must not make a page of 500 rows huge.
    this.columns = cols
      .filter((c) => !BASE_COLUMNS.has(c))
      .map((c) => `m.${c}`)
      .concat([
        `substr(m.content, 1, ${CONTENT_PREVIEW}) AS content`,
        `length(m.content) AS content_length`,
        `coalesce(m.run_id, q.run_id) AS answered_by`,
        `l.result AS run_result`,
      ])
      .join(', ');
    const from = `FROM messages m
      LEFT JOIN messages q ON q.id = m.reply_to_id
      LEFT JOIN session_log l ON l.id = coalesce(m.run_id, q.run_id)`;
    this.s = {
      chats: db.prepare<[number], ChatSummary>(
        `SELECT chat_jid, count(*) AS messages, max(id) AS last_id, max(timestamp) AS last_at
           FROM messages GROUP BY chat_jid ORDER BY last_id DESC LIMIT ?`,
      ),
      chatsLike: db.prepare<[string, number], ChatSummary>(
        `SELECT chat_jid, count(*) AS messages, max(id) AS last_id, max(timestamp) AS last_at
           FROM messages WHERE chat_jid LIKE ? ESCAPE '\\' GROUP BY chat_jid ORDER BY last_id DESC LIMIT ?`,
      ),
      // The saved audio of the rows in an id range of one chat: uploads and voice notes, and spoken replies.
      audioIn: db.prepare<[string, number, number, string, number, number], ChatAudio>(
        `SELECT a.message_id, a.seq, a.name, a.mime FROM attachments a JOIN messages m ON m.id = a.message_id
          WHERE m.chat_jid = ? AND a.message_id BETWEEN ? AND ? AND a.state = 'saved'
            AND lower(coalesce(a.mime, '')) LIKE 'audio/%'
         UNION ALL
         SELECT f.message_id, f.seq, f.name, f.mime FROM outbound_files f JOIN messages m ON m.id = f.message_id
          WHERE m.chat_jid = ? AND f.message_id BETWEEN ? AND ? AND f.state = 'ok'
            AND lower(coalesce(f.mime, '')) LIKE 'audio/%'
         ORDER BY 1, 2`,
      ),
      run: db.prepare<[number], RunView['run']>(`SELECT * FROM session_log WHERE id = ?`),
      toolCalls: db.prepare<[number], CallRow>(
        `SELECT id, seq, turn, tool, substr(input, 1, 300) AS input, decision, decided_by, started_at,
           decided_at, ended_at, output_bytes, error FROM tool_calls WHERE run_id = ? ORDER BY id LIMIT 500`,
      ),
      // The run's own rows, and the replies to them; the chat index bounds the walk to that chat.
      runMessages: db.prepare<[string, number, string, number, number], ChatMessage>(
        `SELECT ${this.columns} ${from}
          WHERE m.chat_jid = ? AND (m.run_id = ? OR (m.is_from_me = 1 AND m.reply_to_id IN
                (SELECT id FROM messages WHERE chat_jid = ? AND run_id = ?)))
          ORDER BY m.id LIMIT ?`,
      ),
    };
  }

  /** The chats with the newest activity first; `like` filters by JID. */
  chats(like: string | undefined, limit: number): ChatSummary[] {
    return like ? this.s.chatsLike.all(likePattern(like), limit) : this.s.chats.all(limit);
  }

  /** One page of a chat, newest first. */
  chat(q: ChatQuery): ChatMessage[] {
    const where = ['m.chat_jid = @chat'];
    if (q.before !== undefined) where.push('m.id < @before');
    if (q.text) where.push(`m.content LIKE @text ESCAPE '\\'`);
    if (q.sender) where.push(`(m.sender LIKE @sender ESCAPE '\\' OR m.sender_name LIKE @sender ESCAPE '\\')`);
    const sql = `SELECT ${this.columns} FROM messages m
      LEFT JOIN messages q ON q.id = m.reply_to_id
      LEFT JOIN session_log l ON l.id = coalesce(m.run_id, q.run_id)
      WHERE ${where.join(' AND ')} ORDER BY m.id DESC LIMIT @limit`;
    let stmt = this.chatStmts.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.chatStmts.set(sql, stmt);
    }
    const rows = stmt.all({
      chat: q.chatJid,
      limit: q.limit,
      ...(q.before !== undefined ? { before: q.before } : {}),
      ...(q.text ? { text: likePattern(q.text) } : {}),
      ...(q.sender ? { sender: likePattern(q.sender) } : {}),
    }) as ChatMessage[];
    return this.withAudio(q.chatJid, rows);
  }

  /** The rows, each with `audio` (its audio files, played beside its text) when it has any. */
  private withAudio(chatJid: string, rows: ChatMessage[]): ChatMessage[] {
    if (rows.length === 0) return rows;
    const ids = rows.map((r) => r.id);
    const lo = Math.min(...ids);
    const hi = Math.max(...ids);
    const byRow = new Map<number, ChatAudio[]>();
    for (const a of this.s.audioIn.all(chatJid, lo, hi, chatJid, lo, hi)) {
      const list = byRow.get(a.message_id) ?? [];
      list.push(a);
      byRow.set(a.message_id, list);
    }
    for (const r of rows) {
      const audio = byRow.get(r.id);
      if (audio) r.audio = audio.map(({ seq, name, mime }) => ({ seq, name, mime }));
    }
    return rows;
  }

  /** A run with its messages and timings, or undefined. */
  run(id: number): RunView | undefined {
    const run = this.s.run.get(id);
    if (!run) return undefined;
    const chat = typeof run.chat_jid === 'string' ? run.chat_jid : '';
    const messages = this.s.runMessages.all(chat, id, chat, id, MAX_PAGE);
    const start = Date.parse(run.started_at);
    const idle = typeof run.idle_ms === 'number' ? run.idle_ms : null;
    const firstReply = messages.find((m) => m.is_from_me === 1);
    const replyAt = firstReply ? Date.parse(String(firstReply.timestamp)) : NaN;
    const calls = this.s.toolCalls.all(id).map(({ started_at, decided_at, ended_at, ...c }) => ({
      ...c,
      at_ms: Math.max(0, started_at - start),
      waited_ms: decided_at === null ? null : decided_at - started_at,
      duration_ms: ended_at === null ? null : ended_at - started_at,
    }));
    return {
      run,
      messages,
      tool_calls: calls,
      timings: {
        ...runSplit(run.started_at, run.ended_at, idle),
        first_reply_ms: Number.isFinite(replyAt) ? Math.max(0, replyAt - start) : null,
        queue_ms: messages
          .filter((m) => m.is_from_me === 0)
          .map((m) => ({
            id: m.id,
            ms:
              typeof m.dispatched_at === 'number'
                ? Math.max(0, m.dispatched_at - Date.parse(String(m.timestamp)))
                : null,
          })),
      },
    };
  }
}

/** A tool_calls row as the run view reads it. */
type CallRow = Omit<RunToolCall, 'at_ms' | 'waited_ms' | 'duration_ms'> & {
  started_at: number;
  decided_at: number | null;
  ended_at: number | null;
};
