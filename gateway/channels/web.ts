import { UsageError } from '../../core/errors.js';
import { isoNow, isValidFolder, TOPIC_RE, type Jid } from '../../core/types.js';
import { splitText } from '../outbound/split.js';
import type { Db } from '../store/db.js';
import type { Channel, InboundSink, SendPart } from './channel.js';

/** How the web chat shows a line: the user's message, the agent's reply, a tool/status line, or the gateway. */
export type ChatRole = 'user' | 'agent' | 'status' | 'gateway' | 'error';

/**
 * One line of a web chat as the browser receives it (SSE `message` event data, history rows). `part` is
 * null for a whole stored row (history, replay, posts) and the part index for a live delivery of a reply,
 * which arrives as the outbox splits it: parts 0, 1, … with the same id.
 */
export interface ChatLine {
  id: number;
  role: ChatRole;
  part: number | null;
  content: string;
  sender: string;
  sender_name: string | null;
  topic: string;
  timestamp: string;
  /** The platform id of the post this reply answers (`<client>-<clientMsgId>`), if known. */
  reply_to: string | null;
}

/**
 * What a subscriber (one SSE connection) is pushed. `cursor` says whether the browser may move its replay
 * cursor (SSE `id:`) to this line: only for the last part of a reply, never for a post (see chat.ts).
 */
export type WebEvent =
  { type: 'message'; line: ChatLine; cursor: boolean } | { type: 'typing'; on: boolean } | { type: 'close' };

/** A browser tab's post, as the HTTP layer hands it over (already checked against registered_groups). */
export interface WebPost {
  folder: string;
  topic: string;
  content: string;
  /** A stable id of the browser (localStorage); becomes the sender `web-<client>`. */
  client?: string;
  senderName?: string;
  /** The tab's id for this post: a retried POST with the same id is stored once. */
  clientMsgId?: string;
}

/** The fields of a messages row that decide how it is shown. */
export interface ChatRow extends Omit<ChatLine, 'role' | 'part'> {
  is_from_me: number;
  kind: string | null;
}

/** The messages columns a ChatRow is read from. */
export const CHAT_COLUMNS = 'id, is_from_me, kind, content, sender, sender_name, topic, timestamp, reply_to';

/** Longest web message, in characters; replies longer than this are split by the outbound deliverer. */
export const WEB_LIMIT = 65_536;

const CLIENT_RE = /^[A-Za-z0-9_-]{1,64}$/;
// An agent marks a reply as a tool/status line by starting it with one of these (CONTRACT has no field
// for it; outbound kind 'status' is the other way). The marker is shown as styling, not as text.
const STATUS_MARKER_RE = /^\s*\[(?:status|tool)\]\s?/i;

/** The JID of a group's web chat. */
export function webJid(folder: string): Jid {
  return `web:${folder}`;
}

/** Splits a reply's text into its role and the text shown (a status marker is removed). */
function replyRole(kind: string | null, content: string): { role: ChatRole; content: string } {
  if (kind === 'gateway' || kind === 'error') return { role: kind, content };
  if (kind === 'status') return { role: 'status', content: content.replace(STATUS_MARKER_RE, '') };
  if (STATUS_MARKER_RE.test(content))
    return { role: 'status', content: content.replace(STATUS_MARKER_RE, '') };
  return { role: 'agent', content };
}

/** How a stored row is shown in the web chat. */
export function toChatLine(row: ChatRow): ChatLine {
  const shown = row.is_from_me
    ? replyRole(row.kind, row.content)
    : { role: 'user' as const, content: row.content };
  return {
    id: row.id,
    role: shown.role,
    part: null,
    content: shown.content,
    sender: row.sender,
    sender_name: row.sender_name,
    topic: row.topic,
    timestamp: row.timestamp,
    reply_to: row.reply_to,
  };
}

type Subscriber = (ev: WebEvent) => void;

/**
 * The built-in web chat channel (platform `web`, JID `web:<folder>`, one topic per browser tab). Inbound
 * posts go through the gateway's InboundSink; replies are pushed to the SSE subscribers of that chat and
 * topic. Nothing is kept here: the messages table is the history, so a tab that was away replays from it.
 */
export class WebChannel implements Channel {
  readonly platform = 'web';
  readonly limit = WEB_LIMIT;
  readonly limitUnit = 'chars' as const;
  private sink: InboundSink | undefined;
  private readonly subs = new Map<string, Set<Subscriber>>();
  private readonly rowById;

  /** `db` is read to push a delivered reply whole, with its kind, exactly as history shows it. */
  constructor(db: Db) {
    this.rowById = db.prepare<[number], ChatRow>(`SELECT ${CHAT_COLUMNS} FROM messages WHERE id = ?`);
  }

  /** Starts accepting posts; the sink stores them and wakes the poll loop. */
  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
  }

  /** Stops accepting posts and ends every open stream (their browsers reconnect and replay later). */
  async stop(): Promise<void> {
    this.sink = undefined;
    const all = [...this.subs.values()].flatMap((s) => [...s]);
    this.subs.clear();
    for (const sub of all) sub({ type: 'close' });
  }

  /** True between start() and stop(). */
  get started(): boolean {
    return this.sink !== undefined;
  }

  /**
   * Stores a browser's message as an inbound row of `web:<folder>` with the tab's topic and echoes it to
   * the other tabs on that topic. Returns the row id, or null when this clientMsgId was stored before.
   */
  post(p: WebPost): number | null {
    if (!this.sink) throw new UsageError('web chat is not started');
    if (!isValidFolder(p.folder)) throw new UsageError(`bad group folder '${p.folder}'`);
    if (p.topic !== '' && !TOPIC_RE.test(p.topic)) throw new UsageError(`bad topic '${p.topic}'`);
    if (p.content.trim() === '') throw new UsageError('empty message');
    if (p.content.length > WEB_LIMIT) throw new UsageError(`message longer than ${WEB_LIMIT} characters`);
    const client = p.client && CLIENT_RE.test(p.client) ? p.client : 'anon';
    const msgId = p.clientMsgId && CLIENT_RE.test(p.clientMsgId) ? `${client}-${p.clientMsgId}` : null;
    const chat_jid = webJid(p.folder);
    const timestamp = isoNow();
    const sender = `web-${client}`;
    const sender_name = p.senderName?.trim().slice(0, 64) || null;
    const id = this.sink({
      chat_jid,
      sender,
      sender_name,
      content: p.content,
      verb: 'message',
      topic: p.topic,
      platform_msg_id: msgId,
      timestamp,
    });
    if (id !== null) {
      const line: ChatLine = {
        id,
        role: 'user',
        part: null,
        content: p.content,
        sender,
        sender_name,
        topic: p.topic,
        timestamp,
        reply_to: null,
      };
      this.emit(chat_jid, p.topic, { type: 'message', line, cursor: false });
    }
    return id;
  }

  /**
   * Follows one chat topic. The callback gets every line delivered from now on, typing changes, and a
   * final `close` when the channel stops. Returns the unsubscribe function.
   */
  subscribe(chatJid: Jid, topic: string, fn: (ev: WebEvent) => void): () => void {
    const key = subKey(chatJid, topic);
    let set = this.subs.get(key);
    if (!set) this.subs.set(key, (set = new Set()));
    set.add(fn);
    return () => {
      const s = this.subs.get(key);
      if (!s) return;
      s.delete(fn);
      if (s.size === 0) this.subs.delete(key);
    };
  }

  /** Number of open subscriptions (tests, the dashboard). */
  subscriberCount(): number {
    let n = 0;
    for (const s of this.subs.values()) n += s.size;
    return n;
  }

  /**
   * Pushes one part of a reply to the tabs following its chat and topic, as the outbox splits it. A tab
   * that is not connected gets the whole row from the messages table when it reconnects, so delivery
   * succeeds whether anyone listens or not.
   */
  async send(part: SendPart): Promise<string | null> {
    const row = this.rowById.get(part.messageId);
    const whole = toChatLine(
      row ?? {
        id: part.messageId,
        is_from_me: 1,
        kind: 'reply',
        content: part.text,
        sender: 'gated',
        sender_name: null,
        topic: part.topic,
        timestamp: isoNow(),
        reply_to: part.replyTo,
      },
    );
    // A status marker opens the reply, so only part 0 carries it.
    const content = part.part === 0 ? replyRole(row?.kind ?? 'reply', part.text).content : part.text;
    const line: ChatLine = { ...whole, part: part.part, content, reply_to: part.replyTo };
    // The cursor may pass this row only with its last part: a tab that drops out mid-reply then gets the
    // whole row replayed instead of missing the rest. The outbox splits with splitText at this limit.
    const last = !row || part.part >= this.partCount(row.content) - 1;
    this.emit(part.chatJid, line.topic, { type: 'message', line, cursor: last });
    return `web-${part.messageId}-${part.part}`;
  }

  private partCount(content: string): number {
    return content.length <= this.limit ? 1 : splitText(content, this.limit, this.limitUnit).length;
  }

  /** Tells every tab of the chat that the agent is (or stopped) working. */
  async typing(chatJid: Jid, on: boolean): Promise<void> {
    for (const [key, set] of this.subs) {
      if (!key.startsWith(`${chatJid}\u0000`)) continue;
      for (const fn of set) fn({ type: 'typing', on });
    }
  }

  private emit(chatJid: Jid, topic: string, ev: WebEvent): void {
    const set = this.subs.get(subKey(chatJid, topic));
    if (!set) return;
    for (const fn of [...set]) fn(ev);
  }
}

function subKey(chatJid: Jid, topic: string): string {
  return `${chatJid}\u0000${topic}`;
}
