import type { NewInbound } from '../core/types.js';
import { insertAttachments } from './attachments.js';
import type { Db } from './db.js';

/** What a producer of an outbound row says about it. */
export interface NewOutbound {
  chat_jid: string;
  content: string;
  /**
   * reply: an agent's answer; gateway: a command or sticky answer; error: a failure notice; send: an
   * agent's `send` action; reaction: an agent's `react` action (content is the emoji, reply_to the message).
   */
  kind: 'reply' | 'gateway' | 'error' | 'status' | 'send' | 'reaction';
  /** The inbound messages.id this answers, if any. */
  reply_to_id?: number | null;
  /** The platform id of the message this answers (so the adapter can thread the reply). */
  reply_to?: string | null;
  /** The inbound topic (Telegram forum thread, web topic) the reply belongs to. */
  topic?: string;
}

const stmts = new WeakMap<Db, ReturnType<typeof prepare>>();

function prepare(db: Db) {
  return {
    inbound: db.prepare(
      `INSERT INTO messages (chat_jid, sender, sender_name, content, verb, topic, platform_msg_id, reply_to,
                             timestamp, state, error, sender_auth, platform_role)
       VALUES (@chat_jid, @sender, @sender_name, @content, @verb, @topic, @platform_msg_id, @reply_to,
               coalesce(@timestamp, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
               CASE WHEN @withheld IS NULL THEN NULL ELSE 'dropped' END, @withheld, @sender_auth,
               @platform_role)
       ON CONFLICT (chat_jid, platform_msg_id) WHERE platform_msg_id IS NOT NULL DO NOTHING`,
    ),
    outbound: db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, verb, topic, reply_to, is_from_me, delivery, kind,
                             reply_to_id)
       VALUES (@chat_jid, 'gated', @content, 'message', @topic, @reply_to, 1, 'pending', @kind, @reply_to_id)`,
    ),
  };
}

function statements(db: Db) {
  let s = stmts.get(db);
  if (!s) stmts.set(db, (s = prepare(db)));
  return s;
}

/**
 * Stores one inbound event. Returns its id, or null when (chat_jid, platform_msg_id) was stored before:
 * a redelivered platform event is kept once.
 */
export function insertInbound(db: Db, msg: NewInbound): number | null {
  const files = msg.attachments ?? [];
  if (files.length === 0) return insertRow(db, msg);
  // The row and its attachments commit together: a crash never leaves a photo message without its file.
  return db.transaction(() => {
    const id = insertRow(db, msg);
    if (id !== null) insertAttachments(db, id, files, Date.now());
    return id;
  })();
}

/**
 * A channel's sink that stores each event straight into `db` (`gated chat` beside a running gated, whose
 * poll loop takes the rows: its commit watcher hears them).
 */
export function inboundSinkOf(db: Db): (msg: NewInbound) => number | null {
  return (msg) => insertInbound(db, msg);
}

function insertRow(db: Db, msg: NewInbound): number | null {
  const info = statements(db).inbound.run({
    chat_jid: msg.chat_jid,
    sender: msg.sender,
    sender_name: msg.sender_name ?? null,
    content: msg.content,
    verb: msg.verb ?? 'message',
    topic: msg.topic ?? '',
    platform_msg_id: msg.platform_msg_id ?? null,
    reply_to: msg.reply_to ?? null,
    timestamp: msg.timestamp ?? null,
    withheld: msg.withheld ?? null,
    sender_auth: msg.sender_auth ?? null,
    platform_role: msg.platform_role ?? null,
  });
  return info.changes === 0 ? null : Number(info.lastInsertRowid);
}

/**
 * Stores one outbound row (is_from_me = 1, delivery pending). Call it inside the transaction that also
 * records what the reply answers, so the two commit together.
 */
export function insertOutbound(db: Db, out: NewOutbound): number {
  const info = statements(db).outbound.run({
    chat_jid: out.chat_jid,
    content: out.content,
    topic: out.topic ?? '',
    reply_to: out.reply_to ?? null,
    kind: out.kind,
    reply_to_id: out.reply_to_id ?? null,
  });
  return Number(info.lastInsertRowid);
}

/** Text columns of an inbound row the layers and the queue read, and whether NULL is allowed. */
const INBOUND_TEXT: ReadonlyArray<readonly [string, boolean]> = [
  ['chat_jid', false],
  ['sender', false],
  ['content', false],
  ['verb', false],
  ['topic', false],
  ['timestamp', false],
  ['sender_name', true],
  ['platform_msg_id', true],
  ['reply_to', true],
];

/**
 * Why a row read from `messages` cannot be processed (a column of the wrong type: any program may write
 * rows, and databases created before the CHECK constraints accept a BLOB content), or null when it is
 * fine. Checked where rows are read, so one bad row fails alone instead of stopping the rows after it.
 */
export function inboundRowError(row: Record<string, unknown>): string | null {
  for (const [col, nullable] of INBOUND_TEXT) {
    if (!(col in row)) continue;
    const v = row[col];
    if (typeof v === 'string' || (nullable && v === null)) continue;
    const what = v instanceof Uint8Array ? `a ${v.length}-byte blob` : v === null ? 'NULL' : typeof v;
    return `column ${col} holds ${what}, not text`;
  }
  if (typeof row.chat_jid === 'string' && row.chat_jid === '') return 'column chat_jid is empty';
  return null;
}
