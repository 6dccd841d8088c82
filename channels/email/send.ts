import nodemailer, { type Transporter } from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';
import type { EmailConfig } from '../../core/config.js';
import { coerceError, DeliveryError } from '../../core/errors.js';
import { parseJid, type Jid } from '../../core/types.js';
import type { EmailStore } from '../../store/email.js';
import type { SendFile, SendPart } from '../channel.js';
import { mailHtml } from './html.js';
import { smtpOptions } from './servers.js';
import { CorrespondentCap } from './send-cap.js';
import { isSystemAddress } from './map.js';

/** Verbs of stored mail that no answer may go to (map.ts `kindOf`). */
const NEVER_ANSWERED = new Set(['auto-reply', 'bounce', 'list']);

/**
 * The email send path: each part of an outbound row is one mail over SMTP (nodemailer), threaded under the
 * mail it answers (In-Reply-To, References, "Re:" and its subject) and each later part under the part
 * before it. The Message-ID is made from the row, the part and the row's creation time: a mail sent again
 * after a lost answer carries the same id, so mail clients show it once.
 *
 * Loops: every mail sent says `Auto-Submitted: auto-replied` (RFC 3834), so a well-behaved responder never
 * answers it, and a mail to a machine address (mailer-daemon, postmaster, no-reply, list addresses) or in
 * answer to an automatic mail (auto-reply, bounce, list mail) is refused as permanent before it is sent.
 * A responder that marks nothing is stopped by the hourly cap per correspondent (send-cap.ts).
 */
export class MailSender {
  private readonly transport: Transporter;
  private readonly domain: string;

  constructor(
    private readonly config: EmailConfig,
    private readonly store: EmailStore,
    timeoutMs = 30_000,
    private readonly cap = new CorrespondentCap(),
  ) {
    this.transport = nodemailer.createTransport(smtpOptions(config.smtp, config, timeoutMs));
    this.domain = config.address.slice(config.address.lastIndexOf('@') + 1);
  }

  /** Sends one text part; returns the Message-ID it was sent with. */
  async send(part: SendPart): Promise<string> {
    return this.deliver(part, { text: part.text, html: mailHtml(part.text) });
  }

  /**
   * Sends one file of a reply as a mail of its own in the thread, the file attached. Its bytes come read
   * by delivery (`file.data`): the channel never opens a group folder's files itself.
   */
  async sendFile(file: SendFile): Promise<string> {
    return this.deliver(file, {
      text: file.name,
      attachments: [{ filename: file.name, content: file.data, contentType: file.mime }],
    });
  }

  /** Closes the SMTP transport. */
  close(): void {
    this.transport.close();
  }

  private async deliver(
    part: Omit<SendPart, 'text'>,
    body: Pick<Mail.Options, 'text' | 'html' | 'attachments'>,
  ): Promise<string> {
    const to = addressOf(part.chatJid);
    this.refuseLoop(part, to);
    const verdict = this.cap.take(to);
    const over = `over the cap of ${this.cap.perHour} mails per hour to ${to}`;
    if (verdict === 'refuse') throw new DeliveryError('permanent', `${over}: not sent`);
    try {
      if (verdict === 'send') return await this.sendMail(part, to, body);
      // The part gives its place to the one note; the row records why it was not sent.
      await this.sendMail(part, to, { text: this.cap.note(), html: mailHtml(this.cap.note()) });
    } catch (err) {
      this.cap.giveBack(to, verdict);
      throw err;
    }
    throw new DeliveryError('permanent', `${over}: not sent (the correspondent was told once)`);
  }

  private async sendMail(
    part: Omit<SendPart, 'text'>,
    to: string,
    body: Pick<Mail.Options, 'text' | 'html' | 'attachments'>,
  ): Promise<string> {
    const messageId = this.messageIdOf(part);
    const answered = part.replyTo ? this.store.get(part.chatJid, part.replyTo) : undefined;
    const parent = part.part > 0 && part.previousPartId ? part.previousPartId : part.replyTo;
    const refs = [...(answered?.refs ?? (part.replyTo ? [part.replyTo] : []))];
    if (parent && !refs.includes(parent)) refs.push(parent);
    const base = answered?.subject
      ? /^re:/i.test(answered.subject)
        ? answered.subject
        : `Re: ${answered.subject}`
      : firstLine(body.text as string);
    const subject = part.parts > 1 ? `${base} (${part.part + 1}/${part.parts})` : base;
    try {
      await this.transport.sendMail({
        from: this.config.fromName
          ? { name: this.config.fromName, address: this.config.address }
          : this.config.address,
        to,
        subject,
        messageId,
        ...(parent ? { inReplyTo: parent, references: refs } : {}),
        headers: { 'Auto-Submitted': 'auto-replied', 'X-Auto-Response-Suppress': 'All' },
        ...body,
      });
    } catch (err) {
      throw toDeliveryError(err);
    }
    return messageId;
  }

  private refuseLoop(part: Omit<SendPart, 'text'>, to: string): void {
    if (isSystemAddress(to))
      throw new DeliveryError('permanent', `would loop: ${to} is a machine's address, never written to`);
    const verb = part.replyTo ? this.store.verbOf(part.chatJid, part.replyTo) : undefined;
    if (verb !== undefined && NEVER_ANSWERED.has(verb))
      throw new DeliveryError('permanent', `would loop: the mail it answers is automatic (${verb})`);
  }

  private messageIdOf(part: Omit<SendPart, 'text'>): string {
    const t = part.createdAt ? Date.parse(part.createdAt) : Number.NaN;
    const stamp = Number.isFinite(t) ? t.toString(36) : 'x';
    return `<gated.${part.messageId}.${part.part}.${stamp}@${this.domain}>`;
  }
}

/** The address of an `email:` JID; anything else is a permanent delivery error. */
export function addressOf(chatJid: Jid): string {
  const { platform, room } = parseJid(chatJid);
  if (platform !== 'email' || !/^[^\s@<>,;]+@[^\s@<>,;]+$/.test(room))
    throw new DeliveryError('permanent', `not an email chat: ${chatJid}`);
  return room;
}

function firstLine(text: string): string {
  const line = text.split('\n').find((l) => l.trim() !== '') ?? '';
  const plain = line.replace(/[#*_`>[\]]/g, '').trim();
  return plain.length > 78 ? `${plain.slice(0, 75)}…` : plain || '(no subject)';
}

/**
 * Sorts a failed SMTP exchange: 4xx replies and network failures are transient, 5xx permanent, except a
 * refused login (535, EAUTH), which is the operator's to fix and transient like a revoked bot token.
 */
export function toDeliveryError(err: unknown): DeliveryError {
  if (err instanceof DeliveryError) return err;
  const e = err as { responseCode?: number; code?: string; response?: string };
  const code = typeof e.responseCode === 'number' ? e.responseCode : undefined;
  // The server's reply line, never the credentials (nodemailer does not put them into errors).
  const msg = `smtp${code ? ` ${code}` : ''}: ${e.response ?? coerceError(err).message}`;
  if (e.code === 'EAUTH' || code === undefined || code < 500)
    return new DeliveryError('transient', msg, undefined, code);
  return new DeliveryError('permanent', msg, undefined, code);
}
