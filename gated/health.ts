import { badRowsOf, isRowFinding, type BadRows } from '../store/constraints.js';
import type { Db } from '../store/db.js';

/**
 * Refuses to start on a database SQLite cannot read, naming the file: an unreadable header fails at the
 * first statement, a damaged page at the integrity check (which reads every page once). Rows that only
 * break their table's constraints are not a damaged file: they are returned, named, for the log, and gated
 * starts (docs/SECURITY.md).
 */
export function checkReadable(db: Db, file: string): BadRows[] {
  let findings: string[];
  try {
    findings = (db.pragma('quick_check(100)') as Array<{ quick_check: string }>).map((r) => r.quick_check);
  } catch (err) {
    db.close();
    throw new Error(`database ${file} is unreadable: ${(err as Error).message}`);
  }
  if (findings.length === 1 && findings[0] === 'ok') return [];
  const damage = findings.find((f) => !isRowFinding(f));
  if (damage !== undefined) {
    db.close();
    throw new Error(`database ${file} is corrupt: ${damage.slice(0, 200)}`);
  }
  return badRowsOf(db, findings);
}

/** One line naming rows that break a constraint: the file, the table, the row ids and the constraint. */
export function badRowsLine(file: string, bad: BadRows): string {
  return `database ${file}: ${badRowsText(bad)}; started anyway, each is handled as a bad row`;
}

/** `<table> row 7 breaks CHECK (…)`: which rows break which constraint (start's log and `gated doctor`). */
export function badRowsText(bad: BadRows): string {
  const one = bad.rowids.length === 1;
  const rows = bad.rowids.length === 0 ? 'some rows' : `row${one ? '' : 's'} ${bad.rowids.join(', ')}`;
  return `${bad.table} ${rows} break${one ? 's' : ''} ${bad.constraint}`;
}
