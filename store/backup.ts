import { copyFileSync, existsSync, renameSync, rmSync } from 'node:fs';
import { UsageError } from '../core/errors.js';
import { openFile, type Db } from './db.js';
import { SCHEMA_VERSION } from './migrate.js';

/** What `checkDatabaseFile` learned of a database file without changing it. */
export interface FileCheck {
  /** `PRAGMA integrity_check` answered `ok`. */
  ok: boolean;
  /** The problems integrity_check listed (at most 20), or why the file could not be read. */
  problems: string[];
  /** PRAGMA user_version: the schema version the file was written with (-1 when unreadable). */
  version: number;
}

/**
 * Opens `path` read-only and runs `PRAGMA integrity_check` (or the faster `quick_check`) on it. Never
 * throws for a bad file: an unreadable or corrupt file is a check that failed, with the reason.
 */
export function checkDatabaseFile(path: string, quick = false): FileCheck {
  let db: Db | undefined;
  try {
    db = openFile(path, { readonly: true });
    const rows = db.pragma(`${quick ? 'quick_check' : 'integrity_check'}(20)`, { simple: false }) as Record<
      string,
      string
    >[];
    const problems = rows.map((r) => Object.values(r)[0] ?? '').filter((p) => p !== 'ok');
    const version = db.pragma('user_version', { simple: true }) as number;
    return { ok: problems.length === 0, problems, version };
  } catch (err) {
    return { ok: false, problems: [(err as Error).message], version: -1 };
  } finally {
    db?.close();
  }
}

/**
 * Copies the open database `db` into `file` with SQLite's online backup, consistent while gated keeps
 * writing: the whole copy is one backup step, which reads one snapshot (a step that spans a write by another
 * connection would restart). Written to `file.partial` first and renamed, so `file` is never half a
 * database; an existing `file` is refused rather than overwritten. Returns the pages copied.
 */
export async function backupDatabase(db: Db, file: string): Promise<{ pages: number; check: FileCheck }> {
  if (existsSync(file)) throw new UsageError(`${file} exists; choose a new file name for the backup`);
  const partial = `${file}.partial`;
  rmSync(partial, { force: true });
  try {
    // The first step only sizes the copy; from then on every step copies everything that is left.
    const { totalPages } = await db.backup(partial, { progress: () => 0x7fffffff });
    // The copy says WAL, as its source does: any later open (the check below, read-only) would leave
    // `partial-wal` and `partial-shm` beside it, names no rename takes along. In rollback mode the backup
    // is one file; gated turns WAL on again when it opens a restored database.
    const copy = openFile(partial);
    try {
      copy.pragma('journal_mode = DELETE');
    } finally {
      copy.close();
    }
    const check = checkDatabaseFile(partial);
    if (!check.ok) throw new Error(`the backup failed its integrity check: ${check.problems.join('; ')}`);
    renameSync(partial, file);
    return { pages: totalPages, check };
  } catch (err) {
    for (const f of [partial, `${partial}-wal`, `${partial}-shm`]) rmSync(f, { force: true });
    throw err;
  }
}

/** Where `restoreDatabase` put things. */
export interface Restored {
  /** The database that was replaced, kept aside (absent when there was none). */
  aside?: string;
  version: number;
}

/**
 * Replaces the database at `target` by the backup `file`. The caller has made sure no gated owns `target`.
 * The backup must pass integrity_check and be no newer than this code's schema; the replaced database is
 * checkpointed (its WAL folded in) and renamed to `target.replaced-<time>`, never deleted. The copy is made
 * beside `target` and renamed over it, so a crash leaves either the old or the new database.
 */
export function restoreDatabase(file: string, target: string, now = new Date()): Restored {
  if (!existsSync(file)) throw new UsageError(`no backup at ${file}`);
  const check = checkDatabaseFile(file);
  if (!check.ok) {
    throw new UsageError(`${file} is not a sound database, nothing restored: ${check.problems.join('; ')}`);
  }
  if (check.version > SCHEMA_VERSION) {
    throw new UsageError(
      `${file} has schema version ${check.version}, newer than this gated (${SCHEMA_VERSION}); restore it with the gated that wrote it`,
    );
  }
  const incoming = `${target}.restoring`;
  copyFileSync(file, incoming);
  // A backup taken from a running gated names it as the owner; that process is not this database's owner.
  const fresh = openFile(incoming);
  try {
    const hasState = fresh.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'router_state'`).get();
    if (hasState) fresh.prepare(`DELETE FROM router_state WHERE key = 'owner'`).run();
  } finally {
    fresh.close();
  }
  let aside: string | undefined;
  if (existsSync(target)) {
    const old = openFile(target);
    try {
      old.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      old.close();
    }
    aside = `${target}.replaced-${now.toISOString().replace(/[:.]/g, '-')}`;
    renameSync(target, aside);
    for (const ext of ['-wal', '-shm']) rmSync(target + ext, { force: true });
  }
  renameSync(incoming, target);
  return { ...(aside ? { aside } : {}), version: check.version };
}
