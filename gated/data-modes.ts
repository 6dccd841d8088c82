import { chmodSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';

/**
 * gated's own files made unreadable to the process runtime's agents (docs/SECURITY.md, "Runtimes"): a root
 * gated runs them as a user of their own (queue/runtime/agent-user.ts), which reads what any other user
 * may. So at start, when gated is root, the database and its `-wal` and `-shm` files (SQLite gives new
 * ones the database's mode), the `.env` gated read and the web chat's uploads folder are made owner-only,
 * and the data folder (the database's) loses its read and write bits for group and others: names in it
 * are not listed, while the groups folder below it stays reachable by path. Each change is logged once;
 * files already private cost a stat.
 */
export function protectDataFiles(config: Pick<Config, 'db'>, log: Logger, envFile = resolve('.env')): void {
  if (process.getuid?.() !== 0) return;
  const db = resolve(config.db);
  // An in-memory database has no folder of its own to keep private.
  if (!statSync(db, { throwIfNoEntry: false })?.isFile()) return;
  const data = dirname(db);
  const owner = (path: string, mode: number) => restrict(path, mode, log);
  for (const f of [db, `${db}-wal`, `${db}-shm`, envFile]) owner(f, 0o077);
  owner(join(data, 'web-uploads'), 0o077);
  owner(data, 0o066);
}

/** Clears the `bits` of `path`'s mode (nothing when it is missing or has none of them). */
function restrict(path: string, bits: number, log: Logger): void {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st || (st.mode & bits) === 0) return;
  const mode = st.mode & 0o7777 & ~bits;
  chmodSync(path, mode);
  log.info({ path, mode: mode.toString(8) }, 'made private to gated (agents run as another user)');
}
