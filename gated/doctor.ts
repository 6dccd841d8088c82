import { accessSync, constants, existsSync, statfsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { checkDatabaseFile } from '../store/backup.js';
import { findBadRows, isRowFinding, type BadRows } from '../store/constraints.js';
import { danglingNames } from '../store/dangling.js';
import { openFile } from '../store/db.js';
import { badRowsText } from './health.js';
import { SCHEMA_VERSION } from '../store/migrate.js';

/** One finding of `gated doctor`: what was checked, how it went, and what the operator should do. */
export interface Finding {
  /** What was checked: `database`, `engine`, `telegram`, `disk`, … */
  name: string;
  /** `fail` makes doctor exit 1; `warn` is worth reading but gated runs. */
  status: 'ok' | 'warn' | 'fail';
  /** What doctor saw, one line, never a secret. */
  detail: string;
  /** What to do about it (absent when all is well). */
  fix?: string;
}

/** Below this much free space on the database's disk, writes (and so every message) will soon fail. */
const DISK_FAIL_BYTES = 100 * 1024 * 1024;
/** Below this much free space doctor warns. */
const DISK_WARN_BYTES = 1024 * 1024 * 1024;

/** A folder gated must write into: present and writable, or creatable. */
export function writableDir(name: string, path: string, setting: string): Finding {
  if (!existsSync(path)) {
    // gated creates missing folders at start; only a parent it cannot write to is a problem.
    let parent = dirname(path);
    while (!existsSync(parent)) parent = dirname(parent);
    if (!statSync(parent).isDirectory()) {
      return {
        name,
        status: 'fail',
        detail: `${parent} is a file, not a folder`,
        fix: `point ${setting} elsewhere`,
      };
    }
    try {
      accessSync(parent, constants.W_OK);
      return { name, status: 'ok', detail: `${path} does not exist yet; gated creates it at start` };
    } catch {
      return {
        name,
        status: 'fail',
        detail: `${path} does not exist and ${parent} is not writable`,
        fix: `create ${path} for the user gated runs as, or point ${setting} elsewhere`,
      };
    }
  }
  if (!statSync(path).isDirectory()) {
    return {
      name,
      status: 'fail',
      detail: `${path} is a file, not a folder`,
      fix: `point ${setting} elsewhere`,
    };
  }
  try {
    accessSync(path, constants.W_OK | constants.X_OK);
    return { name, status: 'ok', detail: `${path} is writable` };
  } catch {
    return {
      name,
      status: 'fail',
      detail: `${path} is not writable by this user`,
      fix: `chown ${path} to the user gated runs as`,
    };
  }
}

/** The database file: present, sound (`quick_check`), and of a schema version this gated can run. */
export function databaseFinding(path: string): Finding {
  if (!existsSync(path)) {
    return {
      name: 'database',
      status: 'warn',
      detail: `no database at ${path}`,
      fix: `start gated (or run 'gated init') to create it, or set GATED_DB to the existing one`,
    };
  }
  const check = checkDatabaseFile(path, true);
  const rowsOnly = !check.ok && check.problems.length > 0 && check.problems.every(isRowFinding);
  if (!check.ok && !rowsOnly) {
    return {
      name: 'database',
      status: 'fail',
      detail: `${path} failed its check: ${check.problems.slice(0, 3).join('; ')}`,
      fix: `restore the last good copy with 'gated restore FILE' (docs/OPERATIONS.md)`,
    };
  }
  if (check.version > SCHEMA_VERSION) {
    return {
      name: 'database',
      status: 'fail',
      detail: `${path} has schema version ${check.version}, newer than this gated (${SCHEMA_VERSION})`,
      fix: 'run the gated that wrote it, or restore the backup taken before the upgrade',
    };
  }
  const rows = badRowsFinding(path, rowsOnly ? check.problems : []);
  if (rows) return rows;
  if (check.version < SCHEMA_VERSION) {
    return {
      name: 'database',
      status: 'warn',
      detail: `${path} has schema version ${check.version}; this gated upgrades it to ${SCHEMA_VERSION} at start`,
      fix: `take a backup first ('gated backup FILE'): an upgraded database cannot be opened by the older gated`,
    };
  }
  return {
    name: 'database',
    status: 'ok',
    detail: `${path}: quick_check ok, schema version ${check.version}`,
  };
}

/**
 * Rows breaking their table's CHECK or NOT NULL constraints (written with the checks off, or by an older
 * schema): not corruption. Each is named by table, rowids and constraint; gated starts on such a file and
 * fails those rows alone (docs/SECURITY.md), so it is a warning, not a failure. Looked for with queries:
 * a read-only connection's quick_check does not evaluate CHECK constraints. `findings` are quick_check's
 * row findings, if it had any, named as they are when no query finds their rows.
 */
function badRowsFinding(path: string, findings: string[]): Finding | undefined {
  let bad: BadRows[];
  const db = openFile(path, { readonly: true });
  try {
    bad = findBadRows(db);
  } finally {
    db.close();
  }
  if (bad.length === 0 && findings.length === 0) return undefined;
  const what = bad.length > 0 ? bad.slice(0, 3).map(badRowsText).join('; ') : findings.slice(0, 3).join('; ');
  const first = bad[0];
  return {
    name: 'database',
    status: 'warn',
    detail: `${path}: the file is sound, but rows break their constraints: ${what}`,
    fix: first
      ? `correct or delete them (sqlite3 ${path} "SELECT rowid, * FROM ${first.table} WHERE rowid IN (${first.rowids.join(', ')})"); gated fails them alone`
      : 'correct or delete those rows; gated fails them alone',
  };
}

/**
 * Names in the database that point nowhere (store/dangling.ts): a route to a group or daemon that is not
 * registered, a group naming an agent that does not exist, a task or limit of a missing group. gated runs,
 * but every message or run that follows such a name fails, so it is a warning with the first fix.
 */
export function namesFinding(path: string): Finding | undefined {
  if (!existsSync(path)) return undefined;
  const db = openFile(path, { readonly: true });
  let found;
  try {
    found = danglingNames(db);
  } catch {
    return undefined; // a database doctor could not read is the database finding's to report
  } finally {
    db.close();
  }
  if (found.length === 0)
    return { name: 'names', status: 'ok', detail: 'every route, agent, task and limit points somewhere' };
  const first = found[0]!;
  const more = found.length > 3 ? ` (and ${found.length - 3} more: gated routes check lists them)` : '';
  return {
    name: 'names',
    status: 'warn',
    detail:
      found
        .slice(0, 3)
        .map((d) => `${d.where}: ${d.reason}`)
        .join('; ') + more,
    fix: first.fix,
  };
}

/** Free space where the database lives. */
export function diskFinding(path: string, statfs: typeof statfsSync = statfsSync): Finding {
  let dir = dirname(path);
  while (!existsSync(dir)) dir = dirname(dir);
  const s = statfs(dir);
  const free = Number(s.bavail) * Number(s.bsize);
  const detail = `${(free / 1024 ** 3).toFixed(1)} GiB free on the disk of ${dir}`;
  if (free < DISK_FAIL_BYTES) {
    return {
      name: 'disk',
      status: 'fail',
      detail,
      fix: 'free space: gated stops answering when writes fail',
    };
  }
  if (free < DISK_WARN_BYTES) return { name: 'disk', status: 'warn', detail, fix: 'free some space soon' };
  return { name: 'disk', status: 'ok', detail };
}

/** The findings as lines for a terminal: one per check, and the fix indented below a problem. */
export function doctorLines(findings: readonly Finding[]): string[] {
  const lines: string[] = [];
  const width = Math.max(...findings.map((f) => f.name.length));
  for (const f of findings) {
    lines.push(`${f.status.toUpperCase().padEnd(4)}  ${f.name.padEnd(width)}  ${f.detail}`);
    if (f.fix && f.status !== 'ok') lines.push(`      ${' '.repeat(width)}  fix: ${f.fix}`);
  }
  const failed = findings.filter((f) => f.status === 'fail').length;
  const warned = findings.filter((f) => f.status === 'warn').length;
  lines.push(
    failed
      ? `${failed} problem${failed === 1 ? '' : 's'} to fix`
      : `all good${warned ? ` (${warned} warning${warned === 1 ? '' : 's'})` : ''}`,
  );
  return lines;
}
