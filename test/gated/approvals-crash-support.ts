/**
 * What the two kill -9 approval tests (process and docker runtime) share: the database they start from and
 * the checks of its end state, read on a read-only connection of their own as an operator's sqlite3 would.
 */
import Database from 'better-sqlite3';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';

/** The seeded database of one approvals crash test, watched from the outside. */
export interface PendingToolCase {
  /** The inbound row whose agent calls the tool. */
  id: number;
  watch: Database.Database;
  /** The first column of the first row of `sql`. */
  get(sql: string): unknown;
  /** The chat messages that ask for a decision. */
  asks(): string[];
  /** The end state: one question, one approval row used, the tool ran once and the answer says so. */
  expectRanOnce(): void;
}

/**
 * Group `ops`, whose every Bash call is asked (tool rule 'ask'), and a web chat message that makes the
 * example agent call `Bash make deploy` (its `!tool` mode); written before gated starts.
 */
export function seedPendingTool(env: { GATED_DB: string; GATED_GROUPS_DIR: string }): PendingToolCase {
  const seed = openDatabase(env.GATED_DB);
  addGroup(seed, env.GATED_GROUPS_DIR, 'ops');
  seed
    .prepare(
      `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES ('ops', 1, 'Bash', '*', 'ask')`,
    )
    .run();
  const id = insertInbound(seed, { chat_jid: 'web:ops', sender: 'u', content: '!tool Bash make deploy' });
  seed.close();
  const watch = new Database(env.GATED_DB, { readonly: true });
  const get = (sql: string) => watch.prepare(sql).pluck().get();
  const asks = () =>
    watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%/approve %'`)
      .pluck()
      .all() as string[];
  const expectRanOnce = () => {
    expect(asks()).toHaveLength(1);
    expect(get(`SELECT count(*) FROM tool_approvals`)).toBe(1);
    const reply = watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
      .pluck()
      .all() as string[];
    expect(reply.join('\n')).toContain('tool Bash ran: {"command":"make deploy"}');
    const log = join(env.GATED_GROUPS_DIR, 'ops', '.tool-runs.log');
    expect(existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []).toEqual([
      'Bash {"command":"make deploy"}',
    ]);
    expect(get(`SELECT used_at IS NOT NULL FROM tool_approvals`)).toBe(1);
  };
  return { id: id!, watch, get, asks, expectRanOnce };
}
