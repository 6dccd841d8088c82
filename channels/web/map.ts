import { PLATFORMS } from '../../core/platforms.js';
import type { NewAttachment } from '../../core/files.js';
import type { Jid } from '../../core/types.js';

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
  /** The platform id of the post this reply answers (`<visitor>-<clientMsgId>`), if known. */
  reply_to: string | null;
  /**
   * Files of the line: a user's uploads (inbound attachments) or the agent's `files`. A live part of a reply
   * that is a file carries that one file and empty content. Absent when there are none.
   */
  files?: ChatFile[];
  /** The stored text's full length when `content` was cut for the chat (history lines are bounded). */
  full_length?: number;
  /**
   * On a line that asks about a tool call, or says who decided one: that approval as it stands now. The
   * page shows Approve and Reject while it is pending (docs/WEB.md, "Tool approvals").
   */
  approval?: ChatApproval;
  /** On a person's line: its text is the transcript of its audio (docs/VOICE.md). Absent otherwise. */
  transcript?: true;
}

/** A tool approval as a chat line shows it. */
export interface ChatApproval {
  code: string;
  tool: string;
  state: 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled';
  decided_by: string | null;
  /** True on the line that asks (it gets the buttons), false on the follow-up that says who decided. */
  asks: boolean;
}

/**
 * One file shown with a chat line. The page fetches it from `/api/chat/file?group=&id=<line id>&seq=`, which
 * serves only files of that chat's rows, from inside the group's folder (docs/WEB.md).
 */
export interface ChatFile {
  /** attachments.seq of an inbound row, outbound_files.seq of a reply. */
  seq: number;
  name: string;
  mime: string;
  size: number | null;
  /** False while an upload waits to be saved into the group's folder (or when saving it failed). */
  ready: boolean;
}

/** A draft shown in a chat topic while the agent streams: `text` null when the draft went away. */
export interface ChatDraft {
  id: string;
  text: string | null;
}

/**
 * What a subscriber (one SSE connection) is pushed. `cursor` says whether the browser may move its replay
 * cursor (SSE `id:`) to this line: only for the last part of a reply, never for a post (see chat.ts).
 */
export type WebEvent =
  | { type: 'message'; line: ChatLine; cursor: boolean }
  | { type: 'typing'; on: boolean }
  | { type: 'draft'; draft: ChatDraft }
  /** A posted line's upload settled: `file` is what the line shows now (a link once it is ready). */
  | { type: 'file'; id: number; sender: string; file: ChatFile }
  /** A posted line's audio was transcribed (or not): `line` is the row as it reads now. */
  | { type: 'transcript'; id: number; sender: string; line: ChatLine }
  | { type: 'close' };

/** A browser tab's post, as the HTTP layer hands it over (already checked against registered_groups). */
export interface WebPost {
  folder: string;
  topic: string;
  content: string;
  /**
   * The sender: the visitor id gated issued to the browser, or `admin` for whoever presented the admin token
   * (http/identity.ts); never a field of the request. In-process callers may leave it out (`anon`).
   */
  visitor?: string;
  senderName?: string;
  /** The tab's id for this post: a retried POST with the same id is stored once. */
  clientMsgId?: string;
  /** Uploaded files, already staged (`source` names the staged copy); the content may then be empty. */
  attachments?: NewAttachment[];
}

/** The fields of a messages row that decide how it is shown. */
export interface ChatRow extends Omit<
  ChatLine,
  'role' | 'part' | 'files' | 'full_length' | 'approval' | 'transcript'
> {
  is_from_me: number;
  /** messages.transcript: 1 when the content is the transcript of the row's audio. */
  transcript?: number | null;
  kind: string | null;
  /** The stored content's length; larger than `content` when the read cut it. */
  content_length?: number | null;
}

/** Longest web message, in characters; replies longer than this are split by the outbound deliverer. */
export const WEB_LIMIT = PLATFORMS.web.limit;

/**
 * Longest text of one line of history or replay, in characters: a reply of a few parts is replayed whole,
 * a row far larger than anything the chat sends (any program may write rows) is cut, so it cannot make a
 * history page or a replay enormous. The row keeps all of it.
 */
export const CHAT_LINE_MAX = 4 * WEB_LIMIT;

/** The messages columns a ChatRow is read from, the content cut at CHAT_LINE_MAX characters. */
export const CHAT_COLUMNS = `id, is_from_me, kind, substr(CAST(content AS TEXT), 1, ${CHAT_LINE_MAX}) AS content,
  length(CAST(content AS TEXT)) AS content_length, sender, sender_name, topic, timestamp, reply_to, transcript`;

// An agent marks a reply as a tool/status line by starting it with one of these (the protocol has no field
// for it; outbound kind 'status' is the other way). The marker is shown as styling, not as text.
const STATUS_MARKER_RE = /^\s*\[(?:status|tool)\]\s?/i;

/** The JID of a group's web chat. */
export function webJid(folder: string): Jid {
  return `web:${folder}`;
}

/** Splits a reply's text into its role and the text shown (a status marker is removed). */
export function replyRole(kind: string | null, content: string): { role: ChatRole; content: string } {
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
    ...(!row.is_from_me && row.transcript === 1 ? { transcript: true as const } : {}),
    // Both counted in characters by SQLite: cut exactly when the stored text is longer than the cap.
    ...(row.content_length != null && row.content_length > CHAT_LINE_MAX
      ? { full_length: row.content_length }
      : {}),
  };
}

/** The image types the chat shows inline; every other file is offered as a download. */
export const INLINE_IMAGE_RE = /^image\/(jpeg|png|gif|webp)$/;

/**
 * Audio the page plays in an <audio> element (a voice message, a spoken reply: docs/VOICE.md): served with
 * its own type, like the pictures above; no browser runs anything of these.
 */
export const INLINE_AUDIO_RE = /^audio\/(ogg|mpeg|mp4|wav|webm)$/;
