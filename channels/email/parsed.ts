import type { ParsedMail } from 'mailparser';

/**
 * Parsed mails kept for their attachments, by `<uidvalidity>:<uid>`. The inbox downloader fetches a mail's
 * files one by one (`fetchAttachment`, one call per file) soon after the mail is stored: each call used to
 * fetch the mail over IMAP and parse it whole again, so a mail of 990 parts was parsed 991 times (about
 * 50 s of CPU). Now the parse made when the mail arrived serves every file, and one made by a later fetch
 * (after a restart, or once the mail was let go) serves the rest. Bounded by the source bytes they came
 * from and by time: the oldest go first, and none is kept past `ttlMs`.
 */
export class ParsedMails {
  private readonly kept = new Map<
    string,
    { mail: Promise<ParsedMail>; bytes: number; timer: NodeJS.Timeout }
  >();
  private bytes = 0;

  constructor(
    private readonly maxBytes = 64 * 1024 * 1024,
    private readonly ttlMs = 10 * 60_000,
  ) {}

  /** Keeps `mail` (parsed from `bytes` of source) under `where`; a parse that fails is not kept. */
  put(where: string, mail: Promise<ParsedMail>, bytes: number): void {
    this.drop(where);
    if (bytes > this.maxBytes) return;
    while (this.bytes + bytes > this.maxBytes && this.kept.size > 0)
      this.drop(this.kept.keys().next().value!);
    const timer = setTimeout(() => this.drop(where), this.ttlMs);
    timer.unref();
    this.kept.set(where, { mail, bytes, timer });
    this.bytes += bytes;
    mail.catch(() => this.drop(where));
  }

  /** The mail kept under `where`, else the one `load` parses (then kept for the next files). */
  get(where: string, load: () => Promise<{ mail: Promise<ParsedMail>; bytes: number }>): Promise<ParsedMail> {
    const hit = this.kept.get(where);
    if (hit) return hit.mail;
    const loading = load().then(({ mail, bytes }) => {
      this.put(where, mail, bytes);
      return mail;
    });
    return loading;
  }

  /** Lets go of the mail under `where`. */
  drop(where: string): void {
    const k = this.kept.get(where);
    if (!k) return;
    clearTimeout(k.timer);
    this.kept.delete(where);
    this.bytes -= k.bytes;
  }

  /** Lets go of every mail (the channel stops). */
  clear(): void {
    for (const where of [...this.kept.keys()]) this.drop(where);
  }
}
