import { mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { packageFile } from '../core/paths.js';
import { installAuditTriggers } from './audit-triggers.js';
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
    db.pragma('foreign_keys = ON');
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
