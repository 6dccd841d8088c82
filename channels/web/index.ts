import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../../core/errors.js';
import { isoNow, isValidFolder, TOPIC_RE, type Jid } from '../../core/types.js';
import type { Db } from '../../store/db.js';
import type {
  Channel,
  DraftOps,
  FetchedFile,
  InboundSink,
  SendFile,
  SendPart,
  SettledAttachment,
} from '../channel.js';
import { RowChannel } from '../row-channel.js';
import { WebApprovalLookup } from './approvals.js';
import { UploadStage } from './uploads.js';
import {
  CHAT_COLUMNS,
  replyRole,
  toChatLine,
  WEB_LIMIT,
  webJid,
  type ChatDraft,
  type ChatFile,
  type ChatLine,
  type ChatRow,
  type WebEvent,
  type WebPost,
} from './map.js';

export * from './map.js';
export { UploadStage, UPLOAD_KEEP_MS } from './uploads.js';
export { WebApprovalLookup } from './approvals.js';

/** What the web channel needs besides the database. */
export interface WebChannelOptions {
  /** Where uploads wait for the inbox downloader (default: `gated-web-uploads` in the OS temp folder). */
  uploadsDir?: string;
}

/** Most files one post may carry. */
export const MAX_UPLOAD_FILES = 8;

const CLIENT_RE = /^[A-Za-z0-9_-]{1,64}$/;
// No '-' in a sender, so `<sender>-` opens the platform ids of that sender's posts only (http/chat-view.ts).
const SENDER_RE = /^[A-Za-z0-9_]{1,64}$/;

type Subscriber = (ev: WebEvent) => void;

/**
 * The built-in web chat channel (platform `web`, JID `web:<folder>`, one topic per browser tab). Inbound
 * posts go through the gateway's InboundSink; replies are pushed to the SSE subscribers of that chat and
 * topic. Nothing is kept here: the messages table is the history, so a tab that was away replays from it.
 */
export class WebChannel extends RowChannel implements Channel {
  private sink: InboundSink | undefined;
  private readonly subs = new Map<string, Set<Subscriber>>();
  private readonly rowById;
  private readonly fileSeq;
  private readonly postOf;
  /** The tool approvals that lines ask or announce (shown with their state). */
  readonly approvalLines: WebApprovalLookup;
  /** The draft each chat topic shows now (memory only: after a restart a tab shows none, never a stale one). */
  private readonly shownDrafts = new Map<string, { id: string; text: string }>();
  /** The chats whose agent works now (memory only, as the drafts): a tab that connects starts from it. */
  private readonly working = new Set<string>();
  /** Uploaded files between the POST and the inbox downloader. */
  readonly uploads: UploadStage;
  /**
   * Drafts (docs/WEB.md, "Drafts"): pushed to the tabs of the draft's topic as `draft` events. The answer
   * never edits a draft here: the draft is removed and the reply arrives as its own line, with its row id.
   */
  readonly drafts: DraftOps = {
    finalReplaces: true,
    open: async (chatJid, text, thread = '') => {
      // The topic rides in the id, so that edits and removals (which get no topic) reach the same tabs,
      // also after a restart (the drafts table keeps the id).
      const id = `${randomUUID().slice(0, 8)}:${thread}`;
      this.showDraft(chatJid, id, text);
      return id;
    },
    edit: async (chatJid, id, text) => this.showDraft(chatJid, id, text),
    remove: async (chatJid, id) => {
      const key = subKey(chatJid, draftTopic(id));
      if (this.shownDrafts.get(key)?.id === id) this.shownDrafts.delete(key);
      this.emit(chatJid, draftTopic(id), { type: 'draft', draft: { id, text: null } });
    },
  };

  /** `db` is read to push a delivered reply whole, with its kind, exactly as history shows it. */
  constructor(db: Db, opts: WebChannelOptions = {}) {
    super('web');
    this.rowById = db.prepare<[number], ChatRow>(`SELECT ${CHAT_COLUMNS} FROM messages WHERE id = ?`);
    this.postOf = db.prepare<[number], { chat_jid: Jid; topic: string; sender: string }>(
      `SELECT chat_jid, topic, sender FROM messages WHERE id = ? AND chat_jid LIKE 'web:%'`,
    );
    this.fileSeq = db
      .prepare<[number, string], number>(
        `SELECT seq FROM outbound_files WHERE message_id = ? AND abs_path = ? AND state = 'ok' ORDER BY seq LIMIT 1`,
      )
      .pluck();
    this.approvalLines = new WebApprovalLookup(db);
    this.uploads = new UploadStage(opts.uploadsDir ?? join(tmpdir(), 'gated-web-uploads'));
  }

  /** Starts accepting posts; the sink stores them and wakes the poll loop. */
  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    void this.uploads.sweep(Date.now());
  }

  /** Stops accepting posts and ends every open stream (their browsers reconnect and replay later). */
  async stop(): Promise<void> {
    this.sink = undefined;
    this.shownDrafts.clear();
    this.working.clear();
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
   * the other tabs on that topic. Resolves with the row id once it is committed, or null when this
   * clientMsgId was stored before; a bad post rejects with a UsageError.
   */
  async post(p: WebPost): Promise<number | null> {
    if (!this.sink) throw new UsageError('web chat is not started');
    if (!isValidFolder(p.folder)) throw new UsageError(`bad group folder '${p.folder}'`);
    if (p.topic !== '' && !TOPIC_RE.test(p.topic)) throw new UsageError(`bad topic '${p.topic}'`);
    const files = p.attachments ?? [];
    if (files.length > MAX_UPLOAD_FILES) throw new UsageError(`more than ${MAX_UPLOAD_FILES} files`);
    if (p.content.trim() === '' && files.length === 0) throw new UsageError('empty message');
    if (p.content.length > WEB_LIMIT) throw new UsageError(`message longer than ${WEB_LIMIT} characters`);
    const sender = p.visitor ?? 'anon';
    if (!SENDER_RE.test(sender)) throw new UsageError(`bad web sender '${sender.slice(0, 64)}'`);
    // Every post has a platform id of its sender's, so the answers to it (reply_to) are known as its own,
    // also when the client sent no id of its own (then a retry is not recognised).
    const own = p.clientMsgId && CLIENT_RE.test(p.clientMsgId) ? p.clientMsgId : randomUUID().slice(0, 18);
    const msgId = `${sender}-${own}`;
    const chat_jid = webJid(p.folder);
    const timestamp = isoNow();
    const sender_name = p.senderName?.trim().slice(0, 64) || null;
    const id = await this.sink({
      chat_jid,
      sender,
      sender_name,
      content: p.content,
      verb: 'message',
      topic: p.topic,
      platform_msg_id: msgId,
      timestamp,
      ...(files.length > 0 ? { attachments: files } : {}),
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
        ...(files.length > 0
          ? {
              files: files.map((f, seq): ChatFile => ({
                seq,
                name: f.name,
                mime: f.mime ?? 'application/octet-stream',
                size: f.size,
                ready: false,
              })),
            }
          : {}),
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
    const approval =
      row && part.part === 0 ? this.approvalLines.of(part.chatJid, [row]).get(row.id) : undefined;
    if (approval) line.approval = approval;
    // The cursor may pass this row only with its last part: a tab that drops out mid-reply then gets the
    // whole row replayed instead of missing the rest.
    const last = part.part >= part.parts - 1;
    this.emit(part.chatJid, line.topic, { type: 'message', line, cursor: last });
    return `web-${part.messageId}-${part.part}`;
  }

  /**
   * Pushes one file of a reply (an agent's `files`) as a part of its line; the page shows an image inline
   * and anything else as a download link, both fetched from the chat's file endpoint.
   */
  async sendFile(file: SendFile): Promise<string | null> {
    const row = this.rowById.get(file.messageId);
    const seq = this.fileSeq.get(file.messageId, file.path);
    if (!row || seq === undefined) return `web-${file.messageId}-${file.part}`;
    const shown: ChatFile = { seq, name: file.name, mime: file.mime, size: null, ready: true };
    const line: ChatLine = {
      ...toChatLine(row),
      part: file.part,
      content: '',
      reply_to: file.replyTo,
      files: [shown],
    };
    delete line.full_length;
    const last = file.part >= file.parts - 1;
    this.emit(file.chatJid, line.topic, { type: 'message', line, cursor: last });
    return `web-${file.messageId}-${file.part}`;
  }

  /** Reads an upload the inbox downloader is filling into the group's folder. */
  async fetchAttachment(source: string, maxBytes: number): Promise<FetchedFile> {
    return this.uploads.read(source, maxBytes);
  }

  /** The upload of a posted line is in the group's folder (or never will be): its tabs show the link. */
  attachmentSettled(a: SettledAttachment): void {
    const row = this.postOf.get(a.message_id);
    if (!row) return;
    const file: ChatFile = {
      seq: a.seq,
      name: a.name,
      mime: a.mime ?? 'application/octet-stream',
      size: a.size,
      ready: a.state === 'saved',
    };
    this.emit(row.chat_jid, row.topic, { type: 'file', id: a.message_id, sender: row.sender, file });
  }

  /** A posted line's audio was transcribed (or given up with a note): its tabs show the words now. */
  transcribed(messageId: number): void {
    const post = this.postOf.get(messageId);
    const row = post && this.rowById.get(messageId);
    if (!post || !row) return;
    const line = toChatLine(row);
    this.emit(post.chat_jid, post.topic, { type: 'transcript', id: messageId, sender: post.sender, line });
  }

  /** The draft a chat topic shows now, if any (a tab that connects mid-turn starts from it). */
  currentDraft(chatJid: Jid, topic: string): ChatDraft | undefined {
    return this.shownDrafts.get(subKey(chatJid, topic));
  }

  /** True while the chat's agent works (a tab that connects shows "working" only then). */
  isWorking(chatJid: Jid): boolean {
    return this.working.has(chatJid);
  }

  private showDraft(chatJid: Jid, id: string, text: string): void {
    const topic = draftTopic(id);
    this.shownDrafts.set(subKey(chatJid, topic), { id, text });
    this.emit(chatJid, topic, { type: 'draft', draft: { id, text } });
  }

  /** Tells every tab of the chat that the agent is (or stopped) working. */
  async typing(chatJid: Jid, on: boolean): Promise<void> {
    if (on) this.working.add(chatJid);
    else this.working.delete(chatJid);
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

/** The topic a draft id was opened in (`<random>:<topic>`); '' for an id of another shape. */
function draftTopic(id: string): string {
  const topic = id.slice(id.indexOf(':') + 1);
  return id.includes(':') && TOPIC_RE.test(topic) ? topic : '';
}

function subKey(chatJid: Jid, topic: string): string {
  return `${chatJid}\u0000${topic}`;
}
