import type { SendAs } from '../core/files.js';
import type { TextFormat } from '../core/platforms.js';
import type { Jid, NewInbound } from '../core/types.js';

/**
 * Writes one inbound event into `messages` (deduplicated on chat_jid + platform_msg_id) and wakes the
 * poll loop. Gives, once the row is committed, the new row id, or null when the event was already stored;
 * throws (or rejects) when it could not be stored, and then the platform must not be told it was taken.
 * gated's sink gives a promise (it may wait for another process's write lock): a channel awaits it.
 */
export type InboundSink = (msg: NewInbound) => number | null | Promise<number | null>;

/** What a channel needs to send one part of an outbound row. */
export interface SendPart {
  /** The outbound messages.id (stable across retries and restarts). */
  messageId: number;
  chatJid: Jid;
  text: string;
  /** Index of this part within the split reply, from 0. */
  part: number;
  /** How many parts the reply was split into (the last part is `parts - 1`). */
  parts: number;
  /** The platform message id this reply answers (the inbound row's platform_msg_id), if any. */
  replyTo: string | null;
  /** The topic of the inbound message (Telegram forum thread, …), '' for none. */
  topic: string;
  /** The platform id the previous part got (Bluesky threads each part under the previous one). */
  previousPartId: string | null;
  /**
   * When the outbound row was stored (ISO). With messageId and part it names the part uniquely and
   * stably, which is what platforms with idempotency keys (Bluesky record keys, Discord nonces) get.
   */
  createdAt?: string;
  /** The outbound row's kind (reply, gateway, error, status, send): who speaks, for a terminal's labels. */
  kind?: string | null;
}

/** The text dialect a channel's parts are written in (core/markdown.ts converts; core/platforms.ts names each platform's). */
export type { TextFormat };

/**
 * A platform's webhook endpoint on gated's HTTP server (`/hooks/<platform>`): gets the request untouched
 * (the raw body, for the platform's signature) and answers it. It stores what it accepts before answering,
 * so a platform that gets no 2xx delivers again, and a redelivery is stored once.
 */
export type WebhookHandler = (req: Request) => Promise<Response>;

/** One file of an outbound row, sent as its own part after the text parts (docs/PROTOCOL.md, "Files"). */
export interface SendFile extends Omit<SendPart, 'text'> {
  /** Where the file was when its block was checked (the web chat finds the file's row by it). */
  path: string;
  /**
   * The bytes, read by delivery at the moment of sending under the rules of core/safe-file.ts. Channels
   * never open a group folder's files themselves: a path read later could be a link by then.
   */
  data: Buffer;
  name: string;
  mime: string;
  as: SendAs;
}

/** The bytes of an inbound attachment, as its channel fetched them. */
export interface FetchedFile {
  data: Buffer;
  /** The type the platform reported while serving it, when the row had none. */
  mime: string | null;
}

/**
 * How a channel shows an answer in progress (docs/CHANNELS.md, "Drafts"): one message posted, then edited.
 * Draft texts are plain (half-written Markdown is not converted); the final edit is in the channel's dialect.
 */
export interface DraftOps {
  /**
   * Posts a draft; returns its platform id. Every draft text (`open`, `edit`) is formatted like `send`
   * formats part 0 of an answer (the channel's `textFormat`), so a draft shows rendered, not raw Markdown. `thread` is the topic of the messages the turn answers (a web
   * chat tab, a forum thread), '' for none; platforms that keep drafts per chat may ignore it. `replyTo` is
   * the platform id of the newest message the turn answers: where a draft can be a reply (Discord), it is
   * one, so the answer it becomes is a reply like an answer sent without a draft.
   */
  open(chatJid: Jid, text: string, thread?: string, replyTo?: string | null): Promise<string>;
  /**
   * Replaces a draft's text; `final`: `text` is part 0 of the answer (not a draft any more). An edit that
   * changes nothing succeeds.
   */
  edit(chatJid: Jid, id: string, text: string, final: boolean): Promise<void>;
  /** Deletes a draft (an answer too long for one message replaces it). */
  remove(chatJid: Jid, id: string): Promise<void>;
  /**
   * True when an answer never takes over the draft by an edit: the draft is removed and the answer sent as
   * usual (the web chat, whose answer line must carry the reply row's id, which a draft edit does not know).
   */
  readonly finalReplaces?: boolean;
}

/** One button of an approval message: the label shown and the command a press stands for. */
export interface ApprovalButton {
  label: string;
  /** `/approve CODE` or `/reject CODE`: what the press is stored as (docs/CHANNELS.md, "Buttons"). */
  command: string;
}

/**
 * A message with buttons for a tool approval (docs/CHANNELS.md, "Buttons"). A press comes
 * back through the channel's InboundSink as an ordinary inbound row: content = the button's command,
 * sender = the presser as the platform identifies them (never a field the client chooses), verb `button`,
 * platform_msg_id unique per press (a redelivered press is stored once). The command layer decides who may
 * approve, so a channel never checks that itself.
 */
export interface ApprovalOps {
  /** Longest text a message with buttons takes, when less than the channel's `limit` (Slack's section). */
  readonly limit?: number;
  /**
   * Posts `text` (in the channel's `textFormat`, like a part of an answer) with `buttons` (in order: approve first) to the chat, in `thread` ('' or absent: the
   * chat itself); returns the platform id of the message, which `decided` edits later.
   */
  ask(chatJid: Jid, text: string, buttons: ApprovalButton[], thread?: string): Promise<string>;
  /**
   * Replaces the message's text by `text` (who decided, or that it expired) and removes its buttons.
   * Throws a DeliveryError like send; a message that is already gone counts as done.
   */
  decided(chatJid: Jid, platformId: string, text: string): Promise<void>;
}

/**
 * A platform adapter. `start` begins receiving (inbound rows go through the sink) and resolves once the
 * channel is ready; `send` delivers one part or throws a DeliveryError that says whether to retry.
 */
export interface Channel {
  /** The JID platform this channel owns, one of core/platforms.ts's (`telegram`, `slack`, `web`, …). */
  readonly platform: string;
  /** Longest part the platform accepts, in `limitUnit`s. */
  readonly limit: number;
  readonly limitUnit: 'chars' | 'graphemes';
  /**
   * What the platform reads, as its row says: Markdown as the agent wrote it (the default: Discord, GitHub,
   * email, the web chat), Telegram's HTML subset, Slack's mrkdwn, or plain text (Bluesky). Delivery
   * converts and splits accordingly.
   */
  readonly textFormat?: TextFormat;
  /**
   * The bot's own account once the channel connected (Telegram getMe, Slack auth.test, the GitHub App):
   * the gateway reads its `username` to tell `/cmd@bot` meant for it from one meant for another bot.
   */
  readonly identity?: { readonly username?: string } | undefined;
  start(sink: InboundSink): Promise<void>;
  stop(): Promise<void>;
  /** Sends one part; returns the platform id of the sent message (or null if the platform has none). */
  send(part: SendPart): Promise<string | null>;
  /**
   * Fetches an inbound attachment by the `source` its map wrote. Throws FileTooLarge (never retried) past
   * `maxBytes`; anything else thrown is retried by the inbox downloader.
   */
  fetchAttachment?(source: string, maxBytes: number): Promise<FetchedFile>;
  /**
   * An inbound attachment this channel fetched is settled for good (saved into the group's folder, failed
   * or too large), its row already written: a page that shows the file may update it (the web chat turns
   * "uploading" into the link).
   */
  attachmentSettled?(a: SettledAttachment): void;
  /**
   * The audio of an inbound row of this channel was transcribed, or given up with a note (docs/VOICE.md):
   * its content is what it reads now. A page that shows the row may update it (the web chat does).
   */
  transcribed?(messageId: number): void;
  /** Sends one file of an outbound row; returns its platform id. Throws DeliveryError like `send`. */
  sendFile?(file: SendFile): Promise<string | null>;
  /** Platforms that push events over HTTP (Slack's Events API, GitHub): served at `/hooks/<platform>`. */
  readonly webhook?: WebhookHandler;
  /** Drafts: present on platforms whose messages can be edited in place. */
  readonly drafts?: DraftOps;
  /** Shows or hides a typing indicator; best effort, never throws. */
  typing?(chatJid: Jid, on: boolean): Promise<void>;
  /**
   * Puts `emoji` on the message `messageId` of the chat (an agent's `react` action), where the platform has
   * reactions; throws a DeliveryError like send. Absent: the platform has none.
   */
  react?(chatJid: Jid, messageId: string, emoji: string): Promise<void>;
  /**
   * Approval messages with buttons (§18), where the platform has buttons. Absent: the approval is asked
   * as a plain message naming `/approve CODE` and `/reject CODE [note]`, and followed up (not edited).
   */
  readonly approvals?: ApprovalOps;
}

/** An inbound attachment whose row reached its final state (Channel.attachmentSettled). */
export interface SettledAttachment {
  message_id: number;
  seq: number;
  name: string;
  state: 'saved' | 'failed' | 'too_large';
  size: number | null;
  mime: string | null;
}
