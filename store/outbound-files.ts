import type { Statement } from 'better-sqlite3';
import type { Db } from './db.js';

/** One file an agent named in a block, after the queue checked where it really is. */
export interface ResolvedFile {
  /** As the agent wrote it. */
  path: string;
  /** The real path inside the group folder (symlinks followed), or null when refused. */
  abs: string | null;
  name: string;
  mime: string;
  /** Why it will not be sent (outside the folder, missing, not a file); null when it will. */
  refused: string | null;
}

const stmts = new WeakMap<Db, Statement<unknown[]>>();

/**
 * Records the files of an outbound row (call it in the transaction that inserts the row): refused ones
 * keep their reason for the operator, the others become parts after the row's text (delivery/files.ts).
 */
export function insertOutboundFiles(db: Db, messageId: number, files: readonly ResolvedFile[]): void {
  if (files.length === 0) return;
  let insert = stmts.get(db);
  if (!insert) {
    insert = db.prepare(
      `INSERT INTO outbound_files (message_id, seq, path, abs_path, name, mime, state, error)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    stmts.set(db, insert);
  }
  files.forEach((f, seq) =>
    insert.run(messageId, seq, f.path, f.abs, f.name, f.mime, f.refused ? 'refused' : 'ok', f.refused),
  );
}
