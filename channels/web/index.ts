import { UsageError } from '../../core/errors.js';
import { isoNow, isValidFolder, TOPIC_RE, type Jid } from '../../core/types.js';
import type { Db } from '../../store/db.js';
import type { Channel, InboundSink, SendPart } from '../channel.js';
import {
  CHAT_COLUMNS,
  replyRole,
  toChatLine,
  WEB_LIMIT,
  webJid,
  type ChatLine,
  type ChatRow,
  type WebEvent,
  type WebPost,
} from './map.js';

export * from './map.js';

const CLIENT_RE = /^[A-Za-z0-9_-]{1,64}$/;

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
    // whole row replayed instead of missing the rest.
    const last = part.part >= part.parts - 1;
    this.emit(part.chatJid, line.topic, { type: 'message', line, cursor: last });
    return `web-${part.messageId}-${part.part}`;
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
