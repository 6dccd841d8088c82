import { realpath } from 'node:fs/promises';
import { sendAsOf } from '../core/files.js';
import type { Logger } from '../core/log.js';
import { FileRefused, readInFolder, relativeInside, spoolOf } from '../core/safe-file.js';
import type { Channel, SendPart } from '../channels/channel.js';
import type { Db } from '../store/db.js';
import { SessionStore } from '../store/sessions.js';

/** One file of an outbound row that will be sent (state 'ok'). */
export interface OutboundFile {
  seq: number;
  path: string;
  abs_path: string;
  name: string;
  mime: string;
}

/**
 * The parts of an outbound row: its text split at the platform's limit, then one part per file the agent
 * named (docs/PROTOCOL.md, "Files"). Files keep their place after the text, so part numbers stay the same
 * across restarts and outbound_parts records each file like a text part: sent once, never twice.
 */
export class ReplyParts {
  private readonly filesStmt;
  private readonly sessionOfStmt;
  private readonly refusedStmt;
  private readonly sessions;

  /**
   * `groupsDir` is GATED_GROUPS_DIR (no files are read without it) and `maxBytes` the most one file may
   * hold when it is read for sending.
   */
  constructor(
    db: Db,
    private readonly groupsDir: string | undefined,
    private readonly maxBytes: number,
  ) {
    this.filesStmt = db.prepare(
      `SELECT seq, path, abs_path, name, mime FROM outbound_files
       WHERE message_id = ? AND state = 'ok' AND abs_path IS NOT NULL ORDER BY seq`,
    );
    // The session whose agent named the file: the one that ran the message this row answers.
    this.sessionOfStmt = db.prepare<[number], { group: string; topic: string | null }>(
      `SELECT q.group_folder AS "group", q.session_topic AS topic
         FROM messages m JOIN messages q ON q.id = m.reply_to_id
        WHERE m.id = ? AND q.group_folder IS NOT NULL`,
    );
    // The state stays 'ok': it decides how many parts the row has, which must not change once counted.
    this.refusedStmt = db.prepare(`UPDATE outbound_files SET error = ? WHERE message_id = ? AND seq = ?`);
    this.sessions = new SessionStore(db);
  }

  /** The files of a row that are to be sent, in order. */
  files(messageId: number): OutboundFile[] {
    return this.filesStmt.all(messageId) as OutboundFile[];
  }

  /**
   * The bytes of one file, read now under the rules of core/safe-file.ts: the file was checked when its
   * block arrived, but the agent may have swapped it for a link or a FIFO since. A refusal is recorded on
   * the file's row, logged with its reason and left as a note for the agent's session.
   */
  async read(messageId: number, f: OutboundFile, log: Logger): Promise<Buffer | FileRefused> {
    try {
      if (!this.groupsDir) throw new FileRefused('outside the folder', f.path);
      const root = await realpath(this.groupsDir);
      // Taken through the spool: a hard link to a file outside cannot be raced past the check.
      const spool = await spoolOf(root);
      return await readInFolder(root, relativeInside(root, f.abs_path), this.maxBytes, spool);
    } catch (err) {
      if (!(err instanceof FileRefused)) throw err;
      const refused = new FileRefused(err.reason, f.path);
      this.refusedStmt.run(`refused at delivery: ${refused.reason}`, messageId, f.seq);
      log.warn({ file: f.path, reason: refused.reason }, 'file refused at delivery');
      const session = this.sessionOfStmt.get(messageId);
      if (session) {
        this.sessions.note(
          { group: session.group, topic: session.topic ?? '' },
          `the file ${f.path} was not sent: ${refused.reason}`,
        );
      }
      return refused;
    }
  }
}

/**
 * Sends part `index` of a row whose text parts are `texts` and files `files`. A channel that cannot send
 * files (the terminal chat) gets a one-line mention of the file instead, so the user still learns of it;
 * so does the chat of a file refused when it is read (the part keeps its place, as a line of text).
 */
export async function sendPart(
  channel: Channel,
  base: Omit<SendPart, 'text' | 'part'>,
  index: number,
  texts: readonly string[],
  files: readonly OutboundFile[],
  reader: { parts: ReplyParts; log: Logger },
): Promise<string | null> {
  if (index < texts.length) return channel.send({ ...base, part: index, text: texts[index]! });
  const f = files[index - texts.length]!;
  if (!channel.sendFile) return channel.send({ ...base, part: index, text: `[file: ${f.path}]` });
  const data = await reader.parts.read(base.messageId, f, reader.log);
  if (data instanceof FileRefused) {
    return channel.send({ ...base, part: index, text: `[file not sent: ${f.path} (${data.reason})]` });
  }
  return channel.sendFile({
    ...base,
    part: index,
    path: f.abs_path,
    data,
    name: f.name,
    mime: f.mime,
    as: sendAsOf(f.mime),
  });
}
