import type { Db } from './db.js';

/** What the email channel keeps of one stored mail, to answer it in its thread. */
export interface MailThreadInfo {
  subject: string;
  /** The References a reply to this mail carries: the mail's own References, then its Message-ID. */
  refs: string[];
}

/**
 * The email channel's table (`email_mails`) and the one question it asks of `messages`: statements
 * prepared once per database.
 */
export class EmailStore {
  private readonly putStmt;
  private readonly getStmt;
  private readonly verbStmt;
  private readonly inThreadStmt;

  constructor(db: Db) {
    this.putStmt = db.prepare(
      `INSERT INTO email_mails (chat_jid, message_id, subject, refs) VALUES (?, ?, ?, ?)
       ON CONFLICT (chat_jid, message_id) DO NOTHING`,
    );
    this.getStmt = db.prepare('SELECT subject, refs FROM email_mails WHERE chat_jid = ? AND message_id = ?');
    // A mail of the chat that started the thread, or whose References start with its first Message-ID.
    this.inThreadStmt = db
      .prepare(
        `SELECT 1 FROM email_mails WHERE chat_jid = ?
           AND (message_id = ? OR refs = ? OR substr(refs, 1, length(?) + 1) = ? || ' ') LIMIT 1`,
      )
      .pluck();
    this.verbStmt = db
      .prepare('SELECT verb FROM messages WHERE chat_jid = ? AND platform_msg_id = ? AND is_from_me = 0')
      .pluck();
  }

  /** Remembers a mail (a redelivered one keeps what was stored first). */
  put(chatJid: string, messageId: string, info: MailThreadInfo): void {
    this.putStmt.run(chatJid, messageId, info.subject, info.refs.join(' '));
  }

  /** What was kept of a mail, or undefined. */
  get(chatJid: string, messageId: string): MailThreadInfo | undefined {
    const row = this.getStmt.get(chatJid, messageId) as { subject: string; refs: string } | undefined;
    return row ? { subject: row.subject, refs: row.refs.split(' ').filter(Boolean) } : undefined;
  }

  /**
   * True when the chat took part in the thread whose first Message-ID is `root`: a mail of it (in or out)
   * started that thread or was stored in it.
   */
  inThread(chatJid: string, root: string): boolean {
    return this.inThreadStmt.get(chatJid, root, root, root, root) !== undefined;
  }

  /** The verb of the inbound row of a mail (`auto-reply`, `bounce`, …), or undefined when not stored. */
  verbOf(chatJid: string, messageId: string): string | undefined {
    return (this.verbStmt.get(chatJid, messageId) as string | undefined) ?? undefined;
  }
}
