import { createHash } from 'node:crypto';
import type { AddressObject, ParsedMail } from 'mailparser';
import type { AttachmentKind, NewAttachment } from '../../core/files.js';
import type { Jid, NewInbound } from '../../core/types.js';
import type { MailThreadInfo } from '../../store/email.js';

/**
 * How mail maps onto gated's vocabulary (docs/CHANNELS.md, "Email"):
 * - Chat JID: `email:<address of the correspondent>`, lowercased: everything one person writes is one chat.
 * - platform_msg_id: the Message-ID (`<…@…>`), what the (chat_jid, platform_msg_id) dedup keys on; a mail
 *   without one gets `<sha256:…>` of its bytes, so a redelivered copy is still stored once.
 * - Topic: the thread, `mail-` and 16 hex digits of a hash of its first Message-ID (the first of References,
 *   else In-Reply-To, else the mail's own): each thread is its own session of the group.
 * - reply_to: In-Reply-To.
 * - Content: the text part (mailparser derives it from the HTML part when there is none) without the quoted
 *   history under it; the first mail of a thread starts with `Subject: …`.
 */

/** The JID of a correspondent. */
export function emailJid(address: string): Jid {
  return `email:${address.toLowerCase()}`;
}

/** What kind of mail it is: a person's mail, or one that must never be answered (verb and reason). */
export type MailKind = 'message' | 'auto-reply' | 'bounce' | 'list';

/** Local parts of addresses that only machines write from and that must never be written to. */
const SYSTEM_LOCAL = /^(mailer-daemon|postmaster|no-?reply|do-?not-?reply|bounces?|listserv|majordomo)$/i;

/** True when mail to or from `address` is a machine's: answering it could start a mail loop. */
export function isSystemAddress(address: string): boolean {
  const local = address.slice(0, address.lastIndexOf('@'));
  return SYSTEM_LOCAL.test(local) || /^(owner-|bounce[-+])/i.test(local) || /-request$/i.test(local);
}

function header(mail: ParsedMail, name: string): string {
  const v = mail.headers.get(name);
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && 'value' in v) return String((v as { value: unknown }).value);
  return String(v);
}

/**
 * RFC 3834 and common practice: `Auto-Submitted` other than `no`, `X-Autoreply`/`X-Autorespond`, a
 * delivery report (`multipart/report`) or a machine sender are automatic; `Precedence: bulk|junk|list`
 * and `List-Id` mark list traffic. None of these is ever answered.
 */
export function kindOf(mail: ParsedMail, from: string): MailKind {
  const contentType = header(mail, 'content-type').toLowerCase();
  if (contentType.startsWith('multipart/report') || /^(mailer-daemon|postmaster)@/i.test(from))
    return 'bounce';
  const auto = header(mail, 'auto-submitted').trim().toLowerCase();
  if (
    (auto !== '' && !auto.startsWith('no')) ||
    mail.headers.has('x-autoreply') ||
    mail.headers.has('x-autorespond')
  )
    return 'auto-reply';
  if (/^(bulk|junk|list)$/i.test(header(mail, 'precedence').trim()) || mail.headers.has('list-id'))
    return 'list';
  if (isSystemAddress(from)) return 'auto-reply';
  return 'message';
}

/** The session topic of a thread whose first mail is `root`. */
export function threadTopic(root: string): string {
  return `mail-${createHash('sha256').update(root).digest('hex').slice(0, 16)}`;
}

function idList(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : v.split(/\s+/)).map((s) => s.trim()).filter(Boolean);
}

/**
 * The text a person wrote above the quoted history: trailing `>` lines and the attribution line that
 * introduces them ("On … wrote:"), or everything from an Outlook-style "Original Message" separator on.
 * Quotes inside the text (answered point by point) stay.
 */
export function stripQuoted(text: string): string {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const original = lines.findIndex((l) => /^\s*-{2,}\s*Original Message\s*-{2,}\s*$/i.test(l));
  let end = original >= 0 ? original : lines.length;
  const quoted = (l: string) => /^\s*>/.test(l) || l.trim() === '';
  const before = end;
  while (end > 0 && quoted(lines[end - 1]!)) end -= 1;
  if (end < before && end > 0 && /\bwrote:\s*$/i.test(lines[end - 1]!)) end -= 1;
  const kept = lines.slice(0, end).join('\n').trim();
  // A mail that is nothing but a quote keeps it: an empty message says less than the quote.
  return kept === '' ? text.trim() : kept;
}

function kindOfAttachment(mime: string): AttachmentKind {
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'document';
}

/** The first address of an address header, lowercased. */
function firstAddress(v: AddressObject | AddressObject[] | undefined): { address: string; name: string } {
  const first = (Array.isArray(v) ? v[0] : v)?.value[0];
  return { address: (first?.address ?? '').toLowerCase(), name: first?.name ?? '' };
}

/** One mail read from the mailbox, with where it is (for fetching its attachments later). */
export interface MailIn {
  mail: ParsedMail;
  source: Buffer;
  /** `<uidvalidity>:<uid>`: where fetchAttachment finds the mail again. */
  where: string;
  /** When the server received it. */
  received: Date;
}

/** What a mail becomes: its row, and what a reply to it needs. */
export interface MappedMail {
  row: NewInbound;
  thread: MailThreadInfo;
  /** The first Message-ID of the thread the mail says it belongs to (its own when it starts one). */
  root: string;
}

/**
 * Turns one mail into an inbound row, or null for mail gated ignores: its own (From is the bot's
 * address) and mail without a sender. Automatic mail is stored `withheld` (never answered), without
 * its attachments.
 */
export function mailToInbound(input: MailIn, self: string): MappedMail | null {
  const { mail } = input;
  const from = firstAddress(mail.from);
  if (from.address === '' || from.address === self) return null;
  const messageId =
    mail.messageId ?? `<sha256:${createHash('sha256').update(input.source).digest('hex').slice(0, 32)}>`;
  const refs = idList(mail.references);
  const inReplyTo = idList(mail.inReplyTo)[0];
  const root = refs[0] ?? inReplyTo ?? messageId;
  const subject = (mail.subject ?? '').trim();
  const body = stripQuoted(mail.text ?? '');
  const kind = kindOf(mail, from.address);
  // A mail whose text opens with a command (`/approve K7QXM2HP`) is that command, whatever its subject.
  const command = body.trimStart().startsWith('/');
  const content = !inReplyTo && subject !== '' && !command ? `Subject: ${subject}\n\n${body}` : body;
  const attachments: NewAttachment[] =
    kind !== 'message'
      ? []
      : mail.attachments
          .map((a, i) => ({ a, i }))
          .filter(({ a }) => a.contentDisposition === 'attachment' || (a.filename ?? '') !== '')
          .map(({ a, i }) => ({
            kind: kindOfAttachment(a.contentType),
            name: a.filename || `attachment-${i + 1}`,
            mime: a.contentType || null,
            size: a.size ?? null,
            source: `${input.where}#${i}`,
          }));
  const row: NewInbound = {
    chat_jid: emailJid(from.address),
    sender: from.address,
    sender_name: from.name || null,
    content,
    verb: kind,
    topic: threadTopic(root),
    platform_msg_id: messageId,
    reply_to: inReplyTo ?? null,
    // The server's arrival time: the Date header is the sender's word and may be skewed or missing.
    timestamp: input.received.toISOString(),
    ...(attachments.length > 0 ? { attachments } : {}),
    ...(kind !== 'message' ? { withheld: `${kind}: automatic mail is never answered` } : {}),
  };
  return { row, thread: { subject, refs: [...refs, messageId] }, root };
}
