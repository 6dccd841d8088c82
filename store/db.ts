import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { packageFile } from '../core/paths.js';
import { installAuditTriggers } from './audit-triggers.js';
import { groupCommitOf } from './group-commit.js';
import { migrate, SCHEMA_VERSION } from './migrate.js';

/** A better-sqlite3 connection with gated's schema applied. */
export type Db = Database.Database;

/** Options for opening the database. */
export interface OpenOptions {
  /** Skip schema application (a read-only tool that must not write). Default false. */
  noSchema?: boolean;
  /** Milliseconds a writer waits for a lock held by another process. Default DEFAULT_BUSY_TIMEOUT_MS. */
  busyTimeoutMs?: number;
}

/** How long any connection waits for another process's write lock before SQLITE_BUSY. */
export const DEFAULT_BUSY_TIMEOUT_MS = 30_000;

let schemaText: string | undefined;

/** The text of schema.sql, read once. */
export function schemaSql(): string {
  schemaText ??= readFileSync(packageFile('schema.sql'), 'utf8');
  return schemaText;
}

/**
 * Opens a database file as it is: no schema, no journal mode change, the busy timeout set. For tools that
 * inspect or move a file (backup, restore) rather than run on it. `readonly` also requires that it exists.
 */
export function openFile(path: string, opts: { readonly?: boolean } = {}): Db {
  const db = new Database(path, {
    timeout: DEFAULT_BUSY_TIMEOUT_MS,
    ...(opts.readonly ? { readonly: true, fileMustExist: true } : {}),
  });
  db.pragma(`busy_timeout = ${DEFAULT_BUSY_TIMEOUT_MS}`);
  return db;
}

/**
 * Opens (creating if needed) the database at `path` in WAL mode with a busy timeout and foreign keys on,
 * and brings its schema to the current version. `:memory:` works for throwaway databases.
 */
export function openDatabase(path: string, opts: OpenOptions = {}): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const timeout = opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
  // Set on the constructor too, so the wait applies from the very first statement of the connection.
  const db = new Database(path, { timeout });
  try {
    db.pragma(`busy_timeout = ${timeout}`);
    if (path !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('cache_size = -32768');
    db.pragma('temp_store = MEMORY');
    db.pragma('foreign_keys = ON');
    // Marks the connection as gated's own for the audit triggers (store/audit-triggers.ts): its changes
    // outside any withActor are gated's ('gated'), while another program's connection stays 'sql'.
    db.pragma('cell_size_check = ON');
    if (!opts.noSchema) applySchema(db);
  } catch (err) {
    db.close();
    const e = err as { code?: string; message?: string };
    // Name the file: "file is not a database" alone does not say which one.
    if (e.code === 'SQLITE_NOTADB' || e.code?.startsWith('SQLITE_CORRUPT')) {
      throw new Error(`database ${path} is unreadable: ${e.message}`);
    }
    throw err;
  }
  return db;
}

/** Applies schema.sql and any migrations; idempotent. Returns the resulting schema version. */
export function applySchema(db: Db): number {
  db.transaction(() => {
    db.exec(schemaSql());
    migrate(db);
    // After the migrations: the triggers cover every column the tables have now.
    installAuditTriggers(db);
  }).immediate();
  return db.pragma('user_version', { simple: true }) as number;
}

export { SCHEMA_VERSION };

/** What a `lockOrLater` transaction returns when another connection held the write lock. */
export const LOCKED: unique symbol = Symbol('the write lock is held by another connection');

/**
 * How long a `lockOrLater` transaction waits for the write lock before it gives up until later: not at
 * all. SQLite's busy handler sleeps on the event loop (its first sleep is 1 ms); a caller that finds the
 * lock held tries again a moment later, with /healthz, timers and I/O served in between.
 */
export const LOCK_TRY_MS = 0;

/**
 * Makes `fn` a BEGIN IMMEDIATE transaction that waits at most `waitMs` for the write lock: when another
 * process (an adapter, sqlite3, `gated send`) holds it longer, `fn` does not run and LOCKED is returned, for
 * a caller that can safely try again later (the poll loop, the scheduler's dispatch) instead of sleeping in
 * SQLite's busy handler on the event loop. Only the BEGIN waits less: once the lock is had the connection's
 * own busy timeout is back for the statements of `fn`. Make it once, not per call.
 */
export function lockOrLater<A extends unknown[], T>(
  db: Db,
  fn: (...args: A) => T,
  waitMs = LOCK_TRY_MS,
): (...args: A) => T | typeof LOCKED {
  let full = -1;
  const restore = () => {
    if (full < 0) return;
    db.pragma(`busy_timeout = ${full}`);
    full = -1;
  };
  const tx = db.transaction((...args: A) => {
    restore();
    return fn(...args);
  });
  return (...args: A) => {
    // With group commit the body joins the turn's group (docs/QUEUE.md), opened here with the same short
    // wait for the lock when it is the turn's first write.
    if (!db.inTransaction && groupCommitOf(db)?.tryJoin(waitMs) === false) return LOCKED;
    // Nested in a transaction already open, the lock is held: a savepoint, as better-sqlite3 makes.
    if (db.inTransaction) return tx(...args);
    full = db.pragma('busy_timeout', { simple: true }) as number;
    db.pragma(`busy_timeout = ${waitMs}`);
    try {
      return tx.immediate(...args);
    } catch (err) {
      // Thrown by BEGIN (the body never ran, the timeout not yet restored): nothing happened.
      if (full >= 0 && String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY')) return LOCKED;
      throw err;
    } finally {
      restore();
    }
  };
}

/** SQLite's answers to a write on a file, or beside it, that this user may only read. */
function isReadOnlyError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('SQLITE_READONLY') || code === 'SQLITE_CANTOPEN');
}

/**
 * Opens the database for a command that only reads (`gated status`, `routes list`, `access audit`): as
 * `openDatabase` does when the file may be written, else read-only, without applying the schema, so an
 * operator who may only read gated's database (another user, a read-only mount) can still look. A
 * read-only database must already be at this gated's schema version: an upgrade needs write access.
 */
export function openForReading(path: string, opts: Pick<OpenOptions, 'busyTimeoutMs'> = {}): Db {
  try {
    return openDatabase(path, opts);
  } catch (err) {
    if (!isReadOnlyError(err)) throw err;
  }
  const db = openReadOnly(path, opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS);
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version !== SCHEMA_VERSION) {
    db.close();
    throw new Error(
      `database ${path} is read-only and at schema version ${version}, this gated reads ${SCHEMA_VERSION}: ` +
        `open it once with write access (gated init) to upgrade it, or use the gated that wrote it`,
    );
  }
  return db;
}

/**
 * A read-only connection. A WAL database needs its shared-memory file: while gated runs it exists and is
 * read in place; when gated has stopped cleanly and this user may not create it beside the file, there is
 * no WAL content to miss, so the file's bytes are read into memory (marked a rollback-journal database,
 * which is all that differs) instead.
 */
function openReadOnly(path: string, timeout: number): Db {
  let db: Db | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true, timeout });
    db.pragma('user_version', { simple: true });
    return db;
  } catch (err) {
    db?.close();
    const wal = `${path}-wal`;
    if (!isReadOnlyError(err) || (existsSync(wal) && statSync(wal).size > 0)) throw err;
  }
  const bytes = readFileSync(path);
  // Bytes 18 and 19 of the header: the file format's write and read versions, 2 for WAL, 1 for a journal.
  if (bytes.length >= 100 && bytes[18] === 2 && bytes[19] === 2) bytes[18] = bytes[19] = 1;
  return new Database(bytes, { readonly: true });
}
