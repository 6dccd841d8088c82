import type { Sleep } from '../../core/backoff.js';
import type { EmailConfig } from '../../core/config.js';
import { coerceError } from '../../core/errors.js';
import { FileTooLarge } from '../../core/files.js';
import type { Logger } from '../../core/log.js';
import type { Db } from '../../store/db.js';
import { EmailStore } from '../../store/email.js';
import { whenWritable } from '../../store/group-commit.js';
import type { Channel, FetchedFile, InboundSink, SendFile, SendPart } from '../channel.js';
import { RowChannel } from '../row-channel.js';
import { authenticateSender, mailResolver, type MailAuthOptions } from './auth.js';
import { DEFAULT_MAIL_BOUNDS, headersOnly, overBounds, parseMail, type MailBounds } from './bounds.js';
import { MailboxReader, type RawMail } from './mailbox.js';
import { ParsedMails } from './parsed.js';
import { CorrespondentCap } from './send-cap.js';
import { mailToInbound, threadTopic } from './map.js';
import { MailSender } from './send.js';

export { EMAIL_CURSOR_KEY } from './mailbox.js';

/** What the email channel needs. */
export interface EmailChannelOptions {
  config: EmailConfig;
  /** Where the mailbox cursor and what replies need of each mail are kept. */
  db: Db;
  log: Logger;
  /** Reads the mailbox again this often without word from IDLE, in ms. Default 60000. */
  pollMs?: number;
  sleep?: Sleep;
  /** An SMTP exchange without an answer after this many ms fails (transient). Default 30000. */
  sendTimeoutMs?: number;
  /** What one mail may hold to be read whole (default DEFAULT_MAIL_BOUNDS). */
  bounds?: MailBounds;
  /** Mails sent to one correspondent within an hour before one note and silence (send-cap.ts; default 30). */
  mailsPerHour?: number;
}

/**
 * Email over IMAP (in, with IDLE; mailbox.ts) and SMTP (out; send.ts), MIME parsed by mailparser. One chat
 * per correspondent, one topic per thread (map.ts). Mail has no drafts and no edits: the channel is always
 * in batch mode. Automatic mail (auto-replies, bounces, list mail) is stored but never answered, and
 * nothing is sent to a machine's address, so two responders never loop (docs/CHANNELS.md, "Email").
 */
export class EmailChannel extends RowChannel implements Channel {
  private readonly store: EmailStore;
  private readonly sender: MailSender;
  private reader: MailboxReader | undefined;
  /** Each mail parsed once: what arrived serves its attachments' downloads (parsed.ts). */
  private readonly parsed = new ParsedMails();
  private readonly auth: MailAuthOptions;

  constructor(private readonly opts: EmailChannelOptions) {
    super('email');
    this.store = new EmailStore(opts.db);
    this.sender = new MailSender(
      opts.config,
      this.store,
      opts.sendTimeoutMs,
      new CorrespondentCap(opts.mailsPerHour),
    );
    const { authservIds, dnsServers } = opts.config.auth;
    this.auth = { authservIds, resolver: mailResolver(dnsServers) };
  }

  async start(sink: InboundSink): Promise<void> {
    if (this.reader) return;
    const { config } = this.opts;
    const reader = new MailboxReader({
      server: config.imap,
      user: config.user,
      password: config.password,
      mailbox: config.mailbox,
      db: this.opts.db,
      log: this.opts.log,
      onMail: (mail) => this.store1(mail, sink),
      ...(this.opts.pollMs !== undefined ? { pollMs: this.opts.pollMs } : {}),
      ...(this.opts.sleep ? { sleep: this.opts.sleep } : {}),
    });
    await reader.start();
    this.reader = reader;
  }

  async stop(): Promise<void> {
    await this.reader?.stop();
    this.reader = undefined;
    this.parsed.clear();
  }

  /**
   * Parses and stores one mail. A mail that cannot be parsed is logged and passed over, never retried; one
   * over the bounds (bounds.ts) is stored from its headers alone with a text that says why.
   */
  private async store1(raw: RawMail, sink: InboundSink): Promise<void> {
    let mapped;
    const where = `${raw.validity}:${raw.uid}`;
    try {
      const why = overBounds(raw.source, this.opts.bounds ?? DEFAULT_MAIL_BOUNDS);
      if (why !== '') this.opts.log.warn({ uid: raw.uid, why }, 'email: mail over the bounds; headers only');
      const parsing = why === '' ? parseMail(raw.source) : headersOnly(raw.source, why);
      if (why === '') this.parsed.put(where, parsing, raw.source.length);
      const mail = await parsing;
      mapped = mailToInbound(
        { mail, source: raw.source, where, received: raw.received },
        this.opts.config.address,
      );
    } catch (err) {
      this.opts.log.warn(
        { uid: raw.uid, err: coerceError(err).message },
        'email: mail not understood; skipped',
      );
      return;
    }
    if (!mapped) return;
    const { row, root } = mapped;
    let { thread } = mapped;
    // Who wrote it decides what it may do (docs/ACCESS.md): automatic mail is never answered anyway.
    if (row.withheld === undefined) row.sender_auth = await this.authenticate(raw, row.sender);
    // A thread is joined only by a correspondent who took part in it: a mail that names another person's
    // thread in its References starts a session of its own, and its own mails stay out of that thread.
    if (root !== row.platform_msg_id && !this.store.inThread(row.chat_jid, root)) {
      row.topic = threadTopic(row.platform_msg_id!);
      thread = { subject: thread.subject, refs: [row.platform_msg_id!] };
    }
    // Off the event loop while another process holds the write lock, as the sink's own write is.
    await whenWritable(this.opts.db, () => this.store.put(row.chat_jid, row.platform_msg_id!, thread));
    await sink(row);
  }

  /** The verdict on the mail's From (auth.ts), logged when it is not a pass. */
  private async authenticate(raw: RawMail, from: string): Promise<string> {
    const verdict = await authenticateSender(raw.source, from, this.auth);
    if (!verdict.startsWith('pass'))
      this.opts.log.info({ uid: raw.uid, from, verdict }, 'email: sender not authenticated');
    return verdict;
  }

  async send(part: SendPart): Promise<string | null> {
    return this.sender.send(part);
  }

  async sendFile(file: SendFile): Promise<string | null> {
    return this.sender.sendFile(file);
  }

  /**
   * `source` is `<uidvalidity>:<uid>#<n>`: the n-th attachment of that mail, from the parse kept since it
   * arrived, else fetched again over IMAP and parsed once for all its files (parsed.ts).
   */
  async fetchAttachment(source: string, maxBytes: number): Promise<FetchedFile> {
    const m = /^([^:]+):(\d+)#(\d+)$/.exec(source);
    if (!m) throw new Error(`not an email attachment source: ${source}`);
    const reader = this.reader;
    if (!reader) throw new Error('email channel not started');
    const mail = await this.parsed.get(`${m[1]}:${m[2]}`, async () => {
      const raw = await reader.fetchSource(m[1]!, Number(m[2]));
      return { mail: parseMail(raw), bytes: raw.length };
    });
    const file = mail.attachments[Number(m[3])];
    if (!file) throw new Error(`mail has no attachment ${m[3]}`);
    if (file.content.length > maxBytes) throw new FileTooLarge(file.content.length, maxBytes);
    return { data: file.content, mime: file.contentType || null };
  }
}
