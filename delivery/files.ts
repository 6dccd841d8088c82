import { sendAsOf } from '../core/files.js';
import type { Channel, SendPart } from '../channels/channel.js';
import type { Db } from '../store/db.js';

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

  constructor(db: Db) {
    this.filesStmt = db.prepare(
      `SELECT seq, path, abs_path, name, mime FROM outbound_files
       WHERE message_id = ? AND state = 'ok' AND abs_path IS NOT NULL ORDER BY seq`,
    );
  }

  /** The files of a row that are to be sent, in order. */
  files(messageId: number): OutboundFile[] {
    return this.filesStmt.all(messageId) as OutboundFile[];
  }
}

/**
 * Sends part `index` of a row whose text parts are `texts` and files `files`. A channel that cannot send
 * files (the terminal chat) gets a one-line mention of the file instead, so the user still learns of it.
 */
export function sendPart(
  channel: Channel,
  base: Omit<SendPart, 'text' | 'part'>,
  index: number,
  texts: readonly string[],
  files: readonly OutboundFile[],
): Promise<string | null> {
  if (index < texts.length) return channel.send({ ...base, part: index, text: texts[index]! });
  const f = files[index - texts.length]!;
  if (!channel.sendFile) return channel.send({ ...base, part: index, text: `[file: ${f.path}]` });
  return channel.sendFile({
    ...base,
    part: index,
    path: f.abs_path,
    name: f.name,
    mime: f.mime,
    as: sendAsOf(f.mime),
  });
}
