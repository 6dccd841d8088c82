import { ATTACHMENT_WAIT_MS } from './attachments.js';
import type { Db } from './db.js';

/**
 * The `transcriptions` table (docs/VOICE.md): inbound rows that came with audio wait in state `transcribing`
 * while the transcriber (voice/transcriber.ts) works on them. The transcript becomes the row's content in
 * the transaction that finishes its transcription row, and the row turns `transcribed`, which the poll loop
 * takes again (gateway/loop.ts): a crash before that commit leaves the row pending, to be transcribed anew,
 * and one after it leaves a transcript that is routed once, like any stored row.
 */

/** Where a transcription is. */
export type TranscriptionState = 'pending' | 'done' | 'failed' | 'refused';

/** A pending transcription whose time has come, with the message's first audio attachment. */
export interface DueTranscription {
  message_id: number;
  group_folder: string | null;
  attempts: number;
  chat_jid: string;
  /** The message's text as stored (a caption, or a platform's `[voice]` label). */
  content: string;
  /** The audio attachment: where its channel fetches it, and what the platform said of it. */
  source: string;
  name: string;
  mime: string | null;
  size: number | null;
}

/** How a transcription ended: a transcript, or a note for the agent instead of one. */
export type TranscriptionOutcome =
  | { state: 'done'; text: string; durationS: number | null; transcriber: string; tookMs: number }
  | { state: 'failed' | 'refused'; note: string; error: string; durationS: number | null };

const stmts = new WeakMap<Db, ReturnType<typeof prepare>>();

function prepare(db: Db) {
  return {
    insert: db.prepare(
      `INSERT INTO transcriptions (message_id, group_folder) VALUES (?, ?) ON CONFLICT (message_id) DO NOTHING`,
    ),
    waiting: db.prepare(`UPDATE messages SET state = 'transcribing' WHERE id = ?`),
    due: db.prepare(
      `SELECT t.message_id, t.group_folder, t.attempts, m.chat_jid, m.content,
              a.source, a.name, a.mime, a.size
       FROM transcriptions t
       JOIN messages m ON m.id = t.message_id
       JOIN attachments a ON a.id = (
         SELECT id FROM attachments WHERE message_id = t.message_id
           AND (kind IN ('voice', 'audio', 'video_note') OR lower(coalesce(mime, '')) LIKE 'audio/%')
         ORDER BY seq LIMIT 1)
       WHERE t.state = 'pending' AND coalesce(t.not_before, 0) <= ? AND m.state = 'transcribing'
       ORDER BY t.message_id LIMIT ?`,
    ),
    // A pending row whose message lost its audio (deleted by hand) is found here too, and finished.
    orphans: db
      .prepare(
        `SELECT t.message_id FROM transcriptions t JOIN messages m ON m.id = t.message_id
         WHERE t.state = 'pending' AND m.state = 'transcribing' AND NOT EXISTS (
           SELECT 1 FROM attachments a WHERE a.message_id = t.message_id
             AND (a.kind IN ('voice', 'audio', 'video_note') OR lower(coalesce(a.mime, '')) LIKE 'audio/%'))
         LIMIT 20`,
      )
      .pluck(),
    nextDue: db
      .prepare(`SELECT min(coalesce(not_before, 0)) FROM transcriptions WHERE state = 'pending'`)
      .pluck(),
    finish: db.prepare(
      `UPDATE transcriptions SET state = @state, error = @error, duration_s = @duration_s,
         transcriber = @transcriber, took_ms = @took_ms
       WHERE message_id = @id AND state = 'pending'`,
    ),
    // The row waits for its files again as a new one does (the wait set at insert ran out meanwhile).
    transcribed: db.prepare(
      `UPDATE messages SET content = @content, transcript = @transcript, state = 'transcribed',
         not_before = CASE WHEN EXISTS (SELECT 1 FROM attachments a
           WHERE a.message_id = messages.id AND a.state = 'pending') THEN @now + ${ATTACHMENT_WAIT_MS}
           ELSE not_before END
       WHERE id = @id AND state = 'transcribing'`,
    ),
    retry: db.prepare(
      `UPDATE transcriptions SET attempts = attempts + 1, not_before = ?, error = ?
       WHERE message_id = ? AND state = 'pending'`,
    ),
    ofMessage: db.prepare(`SELECT * FROM transcriptions WHERE message_id = ?`),
  };
}

function statements(db: Db) {
  let s = stmts.get(db);
  if (!s) stmts.set(db, (s = prepare(db)));
  return s;
}

/**
 * Makes an inbound row wait for its transcript (call it inside the poll batch's transaction): a pending
 * transcriptions row, and the message in state `transcribing`, out of every step until it is transcribed.
 */
export function awaitTranscript(db: Db, messageId: number, group: string | null): void {
  const s = statements(db);
  s.insert.run(messageId, group);
  s.waiting.run(messageId);
}

/** Pending transcriptions whose retry time has come, oldest first. */
export function dueTranscriptions(db: Db, now: number, limit = 4): DueTranscription[] {
  return statements(db).due.all(now, limit) as DueTranscription[];
}

/** Messages waiting for a transcript that no longer have audio to transcribe. */
export function orphanTranscriptions(db: Db): number[] {
  return statements(db).orphans.all() as number[];
}

/** Epoch ms when the next pending transcription is due, or undefined when none is pending. */
export function nextTranscriptionDue(db: Db): number | undefined {
  return (statements(db).nextDue.get() as number | null) ?? undefined;
}

/**
 * Finishes a transcription and puts its message back on its way, in one transaction: the transcript (or the
 * note) becomes the row's content and the row turns `transcribed`. False when it was finished already.
 */
export function finishTranscription(
  db: Db,
  messageId: number,
  outcome: TranscriptionOutcome,
  now: number,
  /** The message's content as the agent gets it (the transcript, after any caption). */
  content: string,
): boolean {
  const s = statements(db);
  return db.transaction(() => {
    const done = outcome.state === 'done';
    const changed = s.finish.run({
      id: messageId,
      state: outcome.state,
      error: done ? null : outcome.error,
      duration_s: outcome.durationS,
      transcriber: done ? outcome.transcriber : null,
      took_ms: done ? outcome.tookMs : null,
    }).changes;
    if (changed === 0) return false;
    s.transcribed.run({ id: messageId, content, transcript: done ? 1 : 0, now });
    return true;
  })();
}

/** Counts a failed attempt; the next one waits until `notBefore`. */
export function retryTranscription(db: Db, messageId: number, notBefore: number, error: string): void {
  statements(db).retry.run(notBefore, error, messageId);
}

/** The transcriptions row of a message, if any (tests and the dashboard). */
export function transcriptionOf(db: Db, messageId: number): Record<string, unknown> | undefined {
  return statements(db).ofMessage.get(messageId) as Record<string, unknown> | undefined;
}
