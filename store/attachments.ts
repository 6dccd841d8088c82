import type { NewAttachment } from '../core/files.js';
import { isAudio, safeFileName } from '../core/files.js';
import type { Db } from './db.js';

/**
 * The `attachments` table: inbound files, stored with their message and filled in later by the inbox
 * downloader (channels/inbox.ts). A message that has pending attachments waits (its `not_before`) until
 * they are fetched (or given up) or ATTACHMENT_WAIT_MS has passed, so the agent normally sees the file, and a download
 * that keeps failing holds that one message only for a bounded time: the chat's other messages never wait.
 */

/** How long a message waits for its attachments before it goes to the agent without them. */
export const ATTACHMENT_WAIT_MS = 30_000;

/** Where an attachment is. */
export type AttachmentState = 'pending' | 'saved' | 'failed' | 'too_large';

/** One attachments row. */
export interface AttachmentRow {
  id: number;
  message_id: number;
  seq: number;
  kind: string;
  name: string;
  mime: string | null;
  size: number | null;
  source: string;
  state: AttachmentState;
  path: string | null;
  attempts: number;
  error: string | null;
}

/** A pending attachment whose message has been routed to a group: ready to download. */
export interface DueAttachment extends AttachmentRow {
  chat_jid: string;
  group_folder: string;
}

/**
 * A message access has served (docs/SECURITY.md): the files of a sender who is `denied`, `pending` or `limited`
 * stay where the platform keeps them (a web upload in its staging folder) until the message is served, so
 * nothing a stranger sends lands in the group's folder before an owner lets it in.
 */
const SERVED = `(m.state IS NULL OR m.state NOT IN ('denied', 'pending', 'limited'))`;

/**
 * The wait of a message released by an approval or an operator (pending or limited → held): a message
 * with files not fetched yet waits for them again, as a new one does (they were never downloaded while it
 * was withheld). Put into the releasing UPDATE of `messages`.
 */
export const RELEASED_WAIT = `not_before = CASE WHEN EXISTS (SELECT 1 FROM attachments a
    WHERE a.message_id = messages.id AND a.state = 'pending') THEN @now + ${ATTACHMENT_WAIT_MS} ELSE not_before END`;

const stmts = new WeakMap<Db, ReturnType<typeof prepare>>();

function prepare(db: Db) {
  return {
    insert: db.prepare(
      `INSERT INTO attachments (message_id, seq, kind, name, mime, size, source)
       VALUES (@message_id, @seq, @kind, @name, @mime, @size, @source)
       ON CONFLICT (message_id, seq) DO NOTHING`,
    ),
    // `audio` marks the rows the transcribe step looks at (docs/VOICE.md); the others never pay for it.
    hold: db.prepare(`UPDATE messages SET not_before = ?, audio = ? WHERE id = ?`),
    due: db.prepare(
      `SELECT a.*, m.chat_jid, m.group_folder FROM attachments a JOIN messages m ON m.id = a.message_id
       WHERE a.state = 'pending' AND m.group_folder IS NOT NULL AND ${SERVED}
         AND (a.not_before IS NULL OR a.not_before <= ?)
       ORDER BY a.id LIMIT ?`,
    ),
    nextDue: db
      .prepare(
        `SELECT min(coalesce(a.not_before, 0)) FROM attachments a JOIN messages m ON m.id = a.message_id
         WHERE a.state = 'pending' AND m.group_folder IS NOT NULL AND ${SERVED}`,
      )
      .pluck(),
    saved: db.prepare(
      `UPDATE attachments SET state = 'saved', path = ?, size = ?, mime = coalesce(mime, ?), error = NULL
       WHERE id = ? AND state = 'pending'`,
    ),
    finish: db.prepare(`UPDATE attachments SET state = ?, error = ? WHERE id = ? AND state = 'pending'`),
    retry: db.prepare(
      `UPDATE attachments SET attempts = attempts + 1, not_before = ?, error = ? WHERE id = ? AND state = 'pending'`,
    ),
    stillPending: db
      .prepare(`SELECT 1 FROM attachments WHERE message_id = ? AND state = 'pending' LIMIT 1`)
      .pluck(),
    // Only the wait set at insert is lifted: a run failure's backoff (attempts > 0) stays.
    release: db.prepare(`UPDATE messages SET not_before = NULL WHERE id = ? AND attempts = 0`),
    ofMessage: db.prepare(`SELECT * FROM attachments WHERE message_id = ? ORDER BY seq`),
  };
}

function statements(db: Db) {
  let s = stmts.get(db);
  if (!s) stmts.set(db, (s = prepare(db)));
  return s;
}

/**
 * Records the attachments of a just-inserted inbound row (call it in the insert's transaction) and makes
 * the row wait for them until `now + ATTACHMENT_WAIT_MS` at the latest; a row with audio is marked `audio`.
 */
export function insertAttachments(
  db: Db,
  messageId: number,
  list: readonly NewAttachment[],
  now: number,
): void {
  const s = statements(db);
  list.forEach((a, seq) =>
    s.insert.run({
      message_id: messageId,
      seq,
      kind: a.kind,
      name: safeFileName(a.name),
      mime: a.mime,
      size: a.size,
      source: a.source,
    }),
  );
  if (list.length > 0) s.hold.run(now + ATTACHMENT_WAIT_MS, list.some(isAudio) ? 1 : null, messageId);
}

/** Pending attachments of routed, served messages whose retry time has come, oldest first. */
export function dueAttachments(db: Db, now: number, limit = 20): DueAttachment[] {
  return statements(db).due.all(now, limit) as DueAttachment[];
}

/** Epoch ms when the next pending attachment of a routed message is due, or undefined. */
export function nextAttachmentDue(db: Db): number | undefined {
  return (statements(db).nextDue.get() as number | null) ?? undefined;
}

/**
 * Finishes one attachment (saved with its path, or failed / too large with a reason). When it was the
 * message's last pending one, the message stops waiting: returns true so the caller wakes the queue.
 */
export function finishAttachment(
  db: Db,
  a: Pick<AttachmentRow, 'id' | 'message_id'>,
  outcome:
    | { state: 'saved'; path: string; size: number; mime: string | null }
    | { state: 'failed' | 'too_large'; error: string },
): boolean {
  const s = statements(db);
  return db.transaction(() => {
    if (outcome.state === 'saved') s.saved.run(outcome.path, outcome.size, outcome.mime, a.id);
    else s.finish.run(outcome.state, outcome.error, a.id);
    if (s.stillPending.get(a.message_id) !== undefined) return false;
    s.release.run(a.message_id);
    return true;
  })();
}

/** Counts a failed download attempt; the next one waits until `notBefore`. */
export function retryAttachment(db: Db, id: number, notBefore: number, error: string): void {
  statements(db).retry.run(notBefore, error, id);
}

/** The attachments of one message, in order. */
export function attachmentsOf(db: Db, messageId: number): AttachmentRow[] {
  return statements(db).ofMessage.all(messageId) as AttachmentRow[];
}
