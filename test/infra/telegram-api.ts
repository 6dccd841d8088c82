/**
 * A small Telegram Bot API server on 127.0.0.1 that telegraf talks to, for tests: `POST /bot<token>/<method>`
 * with JSON in and `{ok, result}` or `{ok:false, error_code, description, parameters}` out, as the real API.
 *
 * It keeps updates the way Telegram does: getUpdates returns those at or above `offset`, holds an empty
 * answer up to `timeout` seconds, drops everything below `offset` (confirmation) and answers 409 to a long
 * poll that a newer getUpdates replaced. Tests inject messages, edits, reactions and joins, read what the
 * bot sent, and make the next sends fail with 429 (retry_after), 5xx or 403.
 *
 * With `rateLimits(...)` on it also enforces Telegram's flood limits as the real API does: a message sent,
 * edited or deleted counts against its chat (about one a second, with a short burst) and against the bot
 * (about 30 a second in all); a call over either is answered 429 with `parameters.retry_after` (whole
 * seconds, at least 1) and changes nothing.
 */
import { listenLoopback, type Loopback } from './loopback.js';
import { checkTelegramHtml } from './telegram-html.js';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Chat, Message, MessageEntity, Update, User } from 'telegraf/types';

/** A failure the next calls of a method answer with. */
export type TelegramFault =
  | { status: 429; retryAfterS: number }
  | { status: 500 | 502 | 503 }
  | { status: 400 | 403; description?: string };

/** One message the bot sent (sendMessage), as the server stored it. */
export interface SentMessage {
  chat_id: number;
  message_id: number;
  text: string;
  reply_to_message_id: number | undefined;
  message_thread_id: number | undefined;
  /** 'HTML' when sent with parse_mode HTML (then `text` passed the strict check of the subset). */
  parse_mode?: string | undefined;
  /** The inline keyboard shown under the message now (an edit may replace or remove it). */
  buttons?: InlineButton[][];
}

/** One button of an inline keyboard: its label and the callback data a press sends. */
export interface InlineButton {
  text: string;
  callback_data?: string;
}

/** A file the bot uploaded (sendPhoto, sendDocument, sendVoice). */
export interface SentFile {
  method: 'sendPhoto' | 'sendDocument' | 'sendVoice';
  chat_id: number;
  message_id: number;
  name: string;
  data: Buffer;
  reply_to_message_id: number | undefined;
}

/** A file a user sends with an injected message. */
export interface InjectFile {
  kind: 'photo' | 'document' | 'voice' | 'audio' | 'video_note';
  data: Buffer;
  /** Documents only. */
  name?: string;
  mime?: string;
}

/** What a test says about an injected user message. */
export interface InjectMessage {
  chat: Chat;
  from: User;
  /** The text, or the caption when `file` is given. */
  text: string;
  file?: InjectFile;
  entities?: MessageEntity[];
  /** Reply to this message id of the chat. */
  replyTo?: number;
  /** Forum topic: the thread id (the topic's creation message id). */
  thread?: number;
}

/** Flood limits as token buckets: `burst` calls at once, refilled at `perSecond`. */
export interface RateLimits {
  perChat: { perSecond: number; burst: number };
  perBot: { perSecond: number; burst: number };
}

/** Telegram's documented limits: about 1 message a second in a chat, 30 a second for a bot. */
export const TELEGRAM_LIMITS: RateLimits = {
  perChat: { perSecond: 1, burst: 3 },
  perBot: { perSecond: 30, burst: 30 },
};

// The calls that send, change or delete a message: what Telegram's flood limits count.
const LIMITED = new Set([
  'sendMessage',
  'editMessageText',
  'deleteMessage',
  'sendPhoto',
  'sendDocument',
  'sendVoice',
]);

/** A token bucket: `take()` is true and takes one when one is there, else says when one will be. */
class Bucket {
  private tokens: number;
  private at = performance.now();

  constructor(private readonly limit: { perSecond: number; burst: number }) {
    this.tokens = limit.burst;
  }

  /** null: taken; else the seconds until a token is there. */
  giveBack(): void {
    this.tokens = Math.min(this.limit.burst, this.tokens + 1);
  }

  take(now: number): number | null {
    this.tokens = Math.min(this.limit.burst, this.tokens + ((now - this.at) / 1000) * this.limit.perSecond);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return null;
    }
    return (1 - this.tokens) / this.limit.perSecond;
  }
}

interface Poll {
  offset: number;
  limit: number;
  res: ServerResponse;
  timer: NodeJS.Timeout;
}

type Json = Record<string, unknown>;

/** The running server; `close()` stops it and cuts every open connection. */
export class TelegramApiServer {
  readonly sent: SentMessage[] = [];
  /** Every message the bot sent, with the text it was sent with (`sent` shows edits and drops deletes). */
  readonly posts: Array<{ chat_id: number; message_id: number; text: string; at: number }> = [];
  /** performance.now() when each message of `sent` was accepted (same index): the bench measures after it. */
  readonly acceptedAt: number[] = [];
  readonly sentFiles: SentFile[] = [];
  /** editMessageText calls that changed a message, in order. */
  readonly edits: Array<{ chat_id: number; message_id: number; text: string; parse_mode?: string }> = [];
  /** Date.now() when each edit of `edits` was made (same index). */
  readonly editedAt: number[] = [];
  /** Messages the bot deleted. */
  readonly deleted: Array<{ chat_id: number; message_id: number }> = [];
  /** Times a file was downloaded through /file/bot<token>/<path>. */
  downloads = 0;
  private readonly files = new Map<string, { path: string; data: Buffer }>();
  private readonly lastIds = new Map<number, number>();
  /** Reactions the bot set (setMessageReaction), in order. */
  readonly reactions: Array<{ chatId: number; messageId: number; emoji: string }> = [];
  /** Every method called, in order (with its JSON payload). */
  readonly calls: Array<{ method: string; payload: Json }> = [];
  /** Keep confirmed updates (simulates a crash before the confirming getUpdates reached Telegram). */
  retainConfirmed = false;
  /** Texts refused with "can't parse entities" (parse_mode HTML that failed the strict check). */
  readonly refusedHtml: string[] = [];
  /** The update injected last. */
  lastUpdate: Update | undefined;
  /** Calls answered 429 by the flood limits (`rateLimits`), by method. */
  readonly limited = new Map<string, number>();
  private limits: { spec: RateLimits; bot: Bucket; chats: Map<number, Bucket> } | undefined;
  private updates: Update[] = [];
  private nextUpdateId = 1000;
  private readonly messages = new Map<number, Map<number, Message>>();
  private readonly chats = new Map<number, Chat>();
  private readonly faults = new Map<string, TelegramFault[]>();
  private poll: Poll | undefined;
  private pollWaiters: Array<() => void> = [];
  private sentWaiters: Array<() => void> = [];

  private loopback!: Loopback;

  private constructor(
    readonly token: string,
    readonly bot: User,
  ) {}

  /** Starts a server for `token` on a free loopback port. */
  static async start(token = '123456:TEST-token', bot: Partial<User> = {}): Promise<TelegramApiServer> {
    const me: User = { id: 123456, is_bot: true, first_name: 'Gated', username: 'gated_test_bot', ...bot };
    const server = createServer();
    const api = new TelegramApiServer(token, me);
    server.on('request', (req, res) => void api.handle(req, res));
    api.loopback = await listenLoopback(server);
    return api;
  }

  /** The apiRoot for telegraf (`TELEGRAM_API_ROOT`). */
  get url(): string {
    return `http://127.0.0.1:${this.loopback.port}`;
  }

  /**
   * A user presses an inline keyboard button under the bot's message: a `callback_query` update whose
   * `from` is that user and whose `data` is the button's callback data, as Telegram sends it. Throws when
   * the message has no such button (a test must press what the bot showed).
   */
  press(chatId: number, messageId: number, from: User, label: string): Update {
    const sent = this.sent.find((m) => m.chat_id === chatId && m.message_id === messageId);
    const button = sent?.buttons?.flat().find((b) => b.text === label);
    if (!sent || !button?.callback_data) throw new Error(`no button '${label}' on message ${messageId}`);
    const message = this.chatMessages(chatId).get(messageId)!;
    return this.inject({
      callback_query: {
        id: `${this.nextUpdateId}${messageId}`,
        from,
        message,
        chat_instance: String(chatId),
        data: button.callback_data,
      },
    } as Omit<Update, 'update_id'>);
  }

  /** Queues a raw update (its update_id assigned here) and answers a waiting long poll. */
  inject(update: Omit<Update, 'update_id'>): Update {
    const full = { ...update, update_id: this.nextUpdateId++ } as Update;
    this.updates.push(full);
    this.lastUpdate = full;
    this.flushPoll();
    return full;
  }

  /** Injects a user message; returns the message as the bot will see it. */
  message(m: InjectMessage): Message.TextMessage {
    this.addChat(m.chat);
    const chatMsgs = this.chatMessages(m.chat.id);
    const message_id = this.nextMessageId(m.chat.id);
    const msg: Json = {
      message_id,
      date: Math.floor(Date.now() / 1000),
      chat: m.chat,
      from: m.from,
    };
    if (m.file) Object.assign(msg, this.media(m.file), m.text ? { caption: m.text } : {});
    else msg.text = m.text;
    if (m.entities) msg[m.file ? 'caption_entities' : 'entities'] = m.entities;
    if (m.thread !== undefined) Object.assign(msg, { message_thread_id: m.thread, is_topic_message: true });
    const replied = m.replyTo ?? m.thread;
    if (replied !== undefined && chatMsgs.has(replied)) msg.reply_to_message = chatMsgs.get(replied);
    chatMsgs.set(message_id, msg as unknown as Message);
    this.inject({ message: msg } as unknown as Omit<Update, 'update_id'>);
    return msg as unknown as Message.TextMessage;
  }

  /** Stores a file as Telegram would; returns its file_id. */
  addFile(data: Buffer, path: string): string {
    const id = `file-${this.files.size + 1}`;
    this.files.set(id, { path, data });
    return id;
  }

  /** The message fields of a media message (a photo comes in three sizes, smallest first, as Telegram does). */
  private media(f: InjectFile): Json {
    const id = this.addFile(f.data, `${f.kind}s/file_${this.files.size}`);
    const size = { file_id: id, file_unique_id: `u${id}`, file_size: f.data.length };
    if (f.kind === 'photo') {
      const thumb = this.addFile(f.data.subarray(0, 8), `photos/thumb_${this.files.size}`);
      return {
        photo: [
          { file_id: thumb, file_unique_id: `u${thumb}`, file_size: 8, width: 90, height: 90 },
          { ...size, width: 1280, height: 960 },
        ],
      };
    }
    if (f.kind === 'voice') return { voice: { ...size, duration: 1, mime_type: f.mime ?? 'audio/ogg' } };
    if (f.kind === 'video_note') return { video_note: { ...size, duration: 1, length: 240 } };
    if (f.kind === 'audio')
      return {
        audio: { ...size, duration: 1, file_name: f.name ?? 'audio.mp3', mime_type: f.mime ?? 'audio/mpeg' },
      };
    return {
      document: { ...size, file_name: f.name ?? 'file.bin', mime_type: f.mime ?? 'application/octet-stream' },
    };
  }

  /** Injects the same message again as a new update, as Telegram does when a confirmation was lost. */
  redeliver(update: Update): Update {
    const { update_id: _, ...rest } = update;
    return this.inject(rest);
  }

  /** Stores a service message (e.g. a forum topic's creation) without an update; returns its id. */
  serviceMessage(chat: Chat, from: User, fields: Json): number {
    this.addChat(chat);
    const message_id = this.nextMessageId(chat.id);
    const msg = { message_id, date: Math.floor(Date.now() / 1000), chat, from, ...fields };
    this.chatMessages(chat.id).set(message_id, msg as unknown as Message);
    return message_id;
  }

  /** The next `n` calls of `method` fail with `fault`. */
  failNext(method: string, fault: TelegramFault, n = 1): void {
    const list = this.faults.get(method) ?? [];
    for (let i = 0; i < n; i += 1) list.push(fault);
    this.faults.set(method, list);
  }

  /** Enforces flood limits from now on (Telegram's by default); `off` stops enforcing them. */
  rateLimits(spec: RateLimits | 'off' = TELEGRAM_LIMITS): void {
    this.limits = spec === 'off' ? undefined : { spec, bot: new Bucket(spec.perBot), chats: new Map() };
  }

  /** Calls answered 429 by the flood limits, in all. */
  get limitedCount(): number {
    let n = 0;
    for (const v of this.limited.values()) n += v;
    return n;
  }

  /** The seconds to wait when `method` to `chatId` is over a flood limit now, else null (and counted). */
  private overLimit(method: string, chatId: number): number | null {
    const l = this.limits;
    if (!l || !LIMITED.has(method)) return null;
    const now = performance.now();
    let chat = l.chats.get(chatId);
    if (!chat) l.chats.set(chatId, (chat = new Bucket(l.spec.perChat)));
    // The chat's own limit first: a call it refuses takes nothing of the bot's.
    const chatWait = chat.take(now);
    if (chatWait !== null) return chatWait;
    const botWait = l.bot.take(now);
    if (botWait === null) return null;
    // Refused by the bot's limit: the chat's token goes back.
    chat.giveBack();
    return botWait;
  }

  /** Resolves when a getUpdates is parked waiting for updates (the bot is polling). */
  waitForPoll(): Promise<void> {
    if (this.poll) return Promise.resolve();
    return new Promise((resolve) => this.pollWaiters.push(resolve));
  }

  /** Resolves once at least `n` messages were sent. */
  async waitForSent(n: number): Promise<SentMessage[]> {
    while (this.sent.length < n) await new Promise<void>((resolve) => this.sentWaiters.push(resolve));
    return this.sent;
  }

  /** Number of calls of `method` so far. */
  count(method: string): number {
    return this.calls.filter((c) => c.method === method).length;
  }

  async close(): Promise<void> {
    if (this.poll) clearTimeout(this.poll.timer);
    await this.loopback.close();
  }

  /** Makes a chat known (the bot can send to it) without a message in it. */
  addChat(chat: Chat): void {
    this.chats.set(chat.id, chat);
  }

  private chatMessages(chatId: number): Map<number, Message> {
    let m = this.messages.get(chatId);
    if (!m) this.messages.set(chatId, (m = new Map()));
    return m;
  }

  private nextMessageId(chatId: number): number {
    // Ids are never reused, even after a delete, as on Telegram.
    const next = (this.lastIds.get(chatId) ?? 0) + 1;
    this.lastIds.set(chatId, next);
    return next;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const m = /^\/bot([^/]+)\/(\w+)$/.exec(req.url ?? '');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const file = /^\/file\/bot([^/]+)\/(.+)$/.exec(req.url ?? '');
    if (file && file[1] === this.token) return this.download(file[2]!, res);
    if (!m) return reply(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
    if (m[1] !== this.token)
      return reply(res, 401, { ok: false, error_code: 401, description: 'Unauthorized' });
    const method = m[2]!;
    const body = Buffer.concat(chunks);
    const { payload, uploads } = await parseBody(body, req.headers['content-type']);
    this.calls.push({ method, payload });
    const fault = this.faults.get(method)?.shift();
    if (fault) return this.fail(res, fault);
    const wait = this.overLimit(method, Number(payload.chat_id));
    if (wait !== null) {
      this.limited.set(method, (this.limited.get(method) ?? 0) + 1);
      // Telegram says whole seconds, at least one.
      return this.fail(res, { status: 429, retryAfterS: Math.max(1, Math.ceil(wait)) });
    }
    switch (method) {
      case 'getMe':
        return ok(res, this.bot);
      case 'deleteWebhook':
      case 'sendChatAction':
      case 'setMyCommands':
        return ok(res, true);
      case 'getUpdates':
        return this.getUpdates(payload, res);
      case 'sendMessage':
        return this.sendMessage(payload, res);
      case 'getFile':
        return this.getFile(payload, res);
      case 'sendPhoto':
      case 'sendDocument':
      case 'sendVoice':
        return this.sendFile(method, payload, uploads, res);
      case 'editMessageText':
        return this.editMessageText(payload, res);
      case 'deleteMessage':
        return this.deleteMessage(payload, res);
      case 'setMessageReaction':
        return this.setMessageReaction(payload, res);
      case 'answerCallbackQuery':
        return ok(res, true);
      default:
        return reply(res, 404, { ok: false, error_code: 404, description: 'Not Found: method not found' });
    }
  }

  private fail(res: ServerResponse, f: TelegramFault): void {
    if (f.status === 429) {
      const d = `Too Many Requests: retry after ${f.retryAfterS}`;
      return reply(res, 429, {
        ok: false,
        error_code: 429,
        description: d,
        parameters: { retry_after: f.retryAfterS },
      });
    }
    if (f.status >= 500)
      return reply(res, f.status, { ok: false, error_code: f.status, description: 'Bad Gateway' });
    const d =
      'description' in f && f.description ? f.description : 'Forbidden: bot was kicked from the group chat';
    reply(res, f.status, { ok: false, error_code: f.status, description: d });
  }

  /** Records a reaction on a message the chat has; Telegram refuses one on a message it does not know. */
  private setMessageReaction(p: Json, res: ServerResponse): void {
    const chatId = Number(p.chat_id);
    const messageId = Number(p.message_id);
    const reaction = (p.reaction as Array<{ type: string; emoji: string }> | undefined) ?? [];
    if (!this.messages.get(chatId)?.has(messageId)) {
      return reply(res, 400, {
        ok: false,
        error_code: 400,
        description: 'Bad Request: message to react not found',
      });
    }
    for (const r of reaction) this.reactions.push({ chatId, messageId, emoji: r.emoji });
    ok(res, true);
  }

  private getUpdates(p: Json, res: ServerResponse): void {
    const offset = typeof p.offset === 'number' ? p.offset : 0;
    const limit = typeof p.limit === 'number' ? p.limit : 100;
    if (!this.retainConfirmed) this.updates = this.updates.filter((u) => u.update_id >= offset);
    if (this.poll) {
      // Telegram answers the older of two concurrent long polls with 409.
      const old = this.poll;
      this.poll = undefined;
      clearTimeout(old.timer);
      const d = 'Conflict: terminated by other getUpdates request';
      reply(old.res, 409, { ok: false, error_code: 409, description: d });
    }
    const ready = this.pending(offset, limit);
    const timeoutS = typeof p.timeout === 'number' ? p.timeout : 0;
    if (ready.length > 0 || timeoutS <= 0) return ok(res, ready);
    const poll: Poll = {
      offset,
      limit,
      res,
      timer: setTimeout(() => this.answerPoll(poll), timeoutS * 1000),
    };
    this.poll = poll;
    res.on('close', () => {
      if (this.poll === poll) {
        clearTimeout(poll.timer);
        this.poll = undefined;
      }
    });
    for (const w of this.pollWaiters.splice(0)) w();
  }

  private pending(offset: number, limit: number): Update[] {
    return this.updates.filter((u) => u.update_id >= offset).slice(0, limit);
  }

  private answerPoll(poll: Poll): void {
    if (this.poll !== poll) return;
    this.poll = undefined;
    clearTimeout(poll.timer);
    ok(poll.res, this.pending(poll.offset, poll.limit));
  }

  private flushPoll(): void {
    if (this.poll && this.pending(this.poll.offset, 1).length > 0) this.answerPoll(this.poll);
  }

  private getFile(p: Json, res: ServerResponse): void {
    const id = String(p.file_id);
    const f = this.files.get(id);
    if (!f)
      return reply(res, 400, { ok: false, error_code: 400, description: 'Bad Request: invalid file_id' });
    ok(res, { file_id: id, file_unique_id: `u${id}`, file_size: f.data.length, file_path: f.path });
  }

  private download(path: string, res: ServerResponse): void {
    const f = [...this.files.values()].find((x) => x.path === path);
    if (!f) return reply(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
    this.downloads += 1;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': f.data.length });
    res.end(f.data);
  }

  private sendFile(
    method: SentFile['method'],
    p: Json,
    uploads: Map<string, { name: string; data: Buffer }>,
    res: ServerResponse,
  ): void {
    const chatId = Number(p.chat_id);
    const chat = this.chats.get(chatId);
    const field = { sendPhoto: 'photo', sendDocument: 'document', sendVoice: 'voice' }[method];
    const upload = uploads.get(field);
    const bad = (d: string) =>
      reply(res, 400, { ok: false, error_code: 400, description: `Bad Request: ${d}` });
    if (!chat) return bad('chat not found');
    if (!upload) return bad(`there is no ${field} in the request`);
    const message_id = this.nextMessageId(chatId);
    const id = this.addFile(upload.data, `sent/${message_id}`);
    const msg = {
      message_id,
      date: Math.floor(Date.now() / 1000),
      chat,
      from: this.bot,
      [field]:
        field === 'photo'
          ? [{ file_id: id, file_unique_id: id, width: 1, height: 1 }]
          : { file_id: id, file_unique_id: id },
    };
    this.chatMessages(chatId).set(message_id, msg as unknown as Message);
    const rp = p.reply_parameters as { message_id?: number } | undefined;
    this.sentFiles.push({
      method,
      chat_id: chatId,
      message_id,
      name: upload.name,
      data: upload.data,
      reply_to_message_id: rp?.message_id,
    });
    for (const w of this.sentWaiters.splice(0)) w();
    ok(res, msg);
  }

  /** Edits a message's text; like Telegram, an edit that changes nothing is a 400. */
  private editMessageText(p: Json, res: ServerResponse): void {
    const chatId = Number(p.chat_id);
    const id = Number(p.message_id);
    const text = typeof p.text === 'string' ? p.text : '';
    const msg = this.chatMessages(chatId).get(id) as (Message & { text?: string }) | undefined;
    const bad = (d: string) =>
      reply(res, 400, { ok: false, error_code: 400, description: `Bad Request: ${d}` });
    if (!msg) return bad('message to edit not found');
    if (text.trim() === '') return bad('message text is empty');
    if (text.length > 4096) return bad('MESSAGE_TOO_LONG');
    const parseMode = typeof p.parse_mode === 'string' ? p.parse_mode : undefined;
    if (parseMode !== undefined && parseMode !== 'HTML') return bad(`unsupported parse_mode ${parseMode}`);
    const refused = parseMode === 'HTML' ? checkTelegramHtml(text) : null;
    if (refused) {
      this.refusedHtml.push(text);
      return bad(refused);
    }
    if (msg.text === text)
      return bad(
        'message is not modified: specified new message content and reply markup are exactly the same',
      );
    msg.text = text;
    const sent = this.sent.find((s) => s.chat_id === chatId && s.message_id === id);
    if (sent) {
      sent.text = text;
      // An edit without reply_markup removes the keyboard, as Telegram does.
      sent.buttons = keyboardOf(p).buttons;
    }
    this.edits.push({
      chat_id: chatId,
      message_id: id,
      text,
      ...(parseMode ? { parse_mode: parseMode } : {}),
    });
    this.editedAt.push(Date.now());
    for (const w of this.sentWaiters.splice(0)) w();
    ok(res, msg);
  }

  private deleteMessage(p: Json, res: ServerResponse): void {
    const chatId = Number(p.chat_id);
    const id = Number(p.message_id);
    if (!this.chatMessages(chatId).delete(id))
      return reply(res, 400, {
        ok: false,
        error_code: 400,
        description: 'Bad Request: message to delete not found',
      });
    const i = this.sent.findIndex((s) => s.chat_id === chatId && s.message_id === id);
    if (i >= 0) {
      this.sent.splice(i, 1);
      this.acceptedAt.splice(i, 1);
    }
    this.deleted.push({ chat_id: chatId, message_id: id });
    for (const w of this.sentWaiters.splice(0)) w();
    ok(res, true);
  }

  /** Resolves once `pred` holds, re-checked after every send, edit or delete. */
  async waitFor(pred: () => boolean): Promise<void> {
    while (!pred()) await new Promise<void>((resolve) => this.sentWaiters.push(resolve));
  }

  private sendMessage(p: Json, res: ServerResponse): void {
    const chatId = Number(p.chat_id);
    const text = typeof p.text === 'string' ? p.text : '';
    const bad = (d: string) =>
      reply(res, 400, { ok: false, error_code: 400, description: `Bad Request: ${d}` });
    const chat = this.chats.get(chatId);
    if (!chat) return bad('chat not found');
    if (text.trim() === '') return bad('message text is empty');
    if (text.length > 4096) return bad('message is too long');
    const parseMode = typeof p.parse_mode === 'string' ? p.parse_mode : undefined;
    if (parseMode !== undefined && parseMode !== 'HTML') return bad(`unsupported parse_mode ${parseMode}`);
    const refused = parseMode === 'HTML' ? checkTelegramHtml(text) : null;
    if (refused) {
      this.refusedHtml.push(text);
      return bad(refused);
    }
    const thread = typeof p.message_thread_id === 'number' ? p.message_thread_id : undefined;
    const chatMsgs = this.chatMessages(chatId);
    // The General topic (id 1) cannot be addressed by id; other threads must exist.
    if (thread !== undefined && (thread === 1 || !chatMsgs.has(thread)))
      return bad('message thread not found');
    const rp = p.reply_parameters as
      { message_id?: number; allow_sending_without_reply?: boolean } | undefined;
    const replyTo = rp?.message_id ?? (p.reply_to_message_id as number | undefined);
    if (replyTo !== undefined && !chatMsgs.has(replyTo) && !rp?.allow_sending_without_reply) {
      return bad('message to be replied not found');
    }
    const message_id = this.nextMessageId(chatId);
    const msg = { message_id, date: Math.floor(Date.now() / 1000), chat, from: this.bot, text };
    if (thread !== undefined) Object.assign(msg, { message_thread_id: thread, is_topic_message: true });
    chatMsgs.set(message_id, msg as unknown as Message);
    this.sent.push({
      chat_id: chatId,
      message_id,
      text,
      reply_to_message_id: replyTo,
      message_thread_id: thread,
      parse_mode: parseMode,
      ...keyboardOf(p),
    });
    this.acceptedAt.push(performance.now());
    this.posts.push({ chat_id: chatId, message_id, text, at: Date.now() });
    for (const w of this.sentWaiters.splice(0)) w();
    ok(res, msg);
  }
}

/** A JSON body, or a multipart one (media uploads) split into fields and files. */
async function parseBody(
  body: Buffer,
  type: string | undefined,
): Promise<{ payload: Json; uploads: Map<string, { name: string; data: Buffer }> }> {
  const uploads = new Map<string, { name: string; data: Buffer }>();
  if (!type?.startsWith('multipart/form-data')) {
    const raw = body.toString('utf8');
    return { payload: (raw ? JSON.parse(raw) : {}) as Json, uploads };
  }
  const form = await new Response(body, { headers: { 'content-type': type } }).formData();
  const payload: Json = {};
  for (const [key, value] of form.entries()) {
    if (typeof value === 'string') {
      // telegraf sends every field as text; JSON-looking ones (reply_parameters) are objects.
      payload[key] = /^[{[]/.test(value) ? JSON.parse(value) : /^-?\d+$/.test(value) ? Number(value) : value;
    } else {
      uploads.set(key, { name: value.name, data: Buffer.from(await value.arrayBuffer()) });
    }
  }
  return { payload, uploads };
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

function ok(res: ServerResponse, result: unknown): void {
  reply(res, 200, { ok: true, result });
}

/** The inline keyboard of a send or edit payload (`reply_markup`, JSON or already parsed). */
function keyboardOf(p: Json): { buttons?: InlineButton[][] } {
  let markup = p.reply_markup as unknown;
  if (typeof markup === 'string') markup = JSON.parse(markup) as unknown;
  const rows = (markup as { inline_keyboard?: InlineButton[][] } | undefined)?.inline_keyboard;
  return rows && rows.length > 0 ? { buttons: rows } : {};
}
