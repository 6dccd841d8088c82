import type { Db } from './db.js';

/**
 * Rows that break their table's constraints, told apart from a damaged file (docs/SECURITY.md: no single row
 * stops the rest). `PRAGMA quick_check` reports both alike; a row written by a program that turned the
 * checks off (`PRAGMA ignore_check_constraints`) or by an older schema is not corruption, and gated names it
 * instead of refusing to start. Each reader of such a row copes with it (the poll loop fails a message row
 * with its reason, an invalid route never matches).
 */

/** A table whose rows break one of its constraints, and which rows (at most 10 rowids). */
export interface BadRows {
  table: string;
  /** `CHECK (<expression>)` or `NOT NULL <column>`. */
  constraint: string;
  rowids: number[];
}

const CHECK_FAILED = /^CHECK constraint failed in (\S+)$/;
const NULL_VALUE = /^NULL value in ([^.\s]+)\.(\S+)$/;

/** True when a quick_check finding is a row breaking a constraint rather than a damaged page. */
export function isRowFinding(finding: string): boolean {
  return CHECK_FAILED.test(finding) || NULL_VALUE.test(finding);
}

/** The rows behind row findings of quick_check, one entry per broken constraint. */
export function badRowsOf(db: Db, findings: readonly string[]): BadRows[] {
  const out: BadRows[] = [];
  const tables = new Set<string>();
  for (const f of findings) {
    const nul = NULL_VALUE.exec(f);
    if (nul) {
      const rowids = rowidsWhere(db, nul[1]!, `${quote(nul[2]!)} IS NULL`);
      out.push({ table: nul[1]!, constraint: `NOT NULL ${nul[2]}`, rowids });
    }
    const check = CHECK_FAILED.exec(f);
    if (check) tables.add(check[1]!);
  }
  for (const table of tables) {
    const sql = db
      .prepare(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`)
      .pluck()
      .get(table);
    for (const expr of checkExpressions(typeof sql === 'string' ? sql : '')) {
      const rowids = rowidsWhere(db, table, `NOT (${expr})`);
      if (rowids.length > 0) out.push({ table, constraint: `CHECK (${oneLine(expr)})`, rowids });
    }
  }
  return out;
}

/**
 * Every table's rows that break a CHECK or NOT NULL constraint, found by querying for them (one scan per
 * table while none is found). For a read-only connection, whose `quick_check` does not evaluate CHECK
 * constraints (`gated doctor` opens the file so).
 */
export function findBadRows(db: Db): BadRows[] {
  const tables = db
    .prepare(`SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
    .all() as { name: string; sql: string | null }[];
  const out: BadRows[] = [];
  for (const { name, sql } of tables) {
    const notNull = (
      db.pragma(`table_info(${quote(name)})`) as { name: string; notnull: number; pk: number }[]
    )
      .filter((c) => c.notnull === 1)
      .map((c) => ({ constraint: `NOT NULL ${c.name}`, where: `${quote(c.name)} IS NULL` }));
    const checks = checkExpressions(sql ?? '').map((e) => ({
      constraint: `CHECK (${oneLine(e)})`,
      where: `NOT (${e})`,
    }));
    const all = [...notNull, ...checks];
    if (all.length === 0) continue;
    if (rowidsWhere(db, name, all.map((c) => `(${c.where})`).join(' OR ')).length === 0) continue;
    for (const c of all) {
      const rowids = rowidsWhere(db, name, c.where);
      if (rowids.length > 0) out.push({ table: name, constraint: c.constraint, rowids });
    }
  }
  return out;
}

function rowidsWhere(db: Db, table: string, where: string): number[] {
  try {
    return db
      .prepare(`SELECT rowid FROM ${quote(table)} WHERE ${where} LIMIT 10`)
      .pluck()
      .all() as number[];
  } catch {
    // A table without rowids, or an expression this SQLite cannot evaluate here: the finding stays unnamed.
    return [];
  }
}

function quote(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 160 ? flat.slice(0, 159) + '…' : flat;
}

/**
 * The expressions of every `CHECK (…)` in a CREATE TABLE statement, skipping quoted strings, quoted names
 * and comments, so a `CHECK` or a parenthesis inside them is not taken for one.
 */
export function checkExpressions(sql: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < sql.length) {
    const skip = skipQuoted(sql, i);
    if (skip > i) {
      i = skip;
      continue;
    }
    const word = /^CHECK\s*\(/i.exec(sql.slice(i, i + 64));
    const before = i === 0 ? ' ' : sql[i - 1]!;
    if (word && !/[A-Za-z0-9_$]/.test(before)) {
      const open = i + word[0].length;
      const close = matchingParen(sql, open);
      if (close < 0) break;
      out.push(sql.slice(open, close));
      i = close + 1;
      continue;
    }
    i += 1;
  }
  return out;
}

/** The index after a quoted string, quoted name or comment starting at `i`, or `i` when none starts there. */
function skipQuoted(sql: string, i: number): number {
  const c = sql[i];
  if (c === "'" || c === '"' || c === '`' || c === '[') {
    const end = sql.indexOf(c === '[' ? ']' : c, i + 1);
    return end < 0 ? sql.length : end + 1;
  }
  if (sql.startsWith('--', i)) {
    const end = sql.indexOf('\n', i);
    return end < 0 ? sql.length : end + 1;
  }
  if (sql.startsWith('/*', i)) {
    const end = sql.indexOf('*/', i + 2);
    return end < 0 ? sql.length : end + 2;
  }
  return i;
}

/** The index of the `)` closing the parenthesis opened just before `from`, or -1. */
function matchingParen(sql: string, from: number): number {
  let depth = 1;
  let i = from;
  while (i < sql.length) {
    const skip = skipQuoted(sql, i);
    if (skip > i) {
      i = skip;
      continue;
    }
    if (sql[i] === '(') depth += 1;
    else if (sql[i] === ')' && --depth === 0) return i;
    i += 1;
  }
  return -1;
}
