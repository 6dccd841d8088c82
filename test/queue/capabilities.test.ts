import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { ActionApplier } from '../../queue/actions/apply.js';
import { capabilitiesByVersion } from '../../queue/actions/capabilities.js';
import { ActionStore } from '../../store/actions.js';
import type { Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { countSql } from '../../bench/sql-count.js';
import { freshDb, tempDir } from '../helpers/db.js';

const version = (db: Db) =>
  db.prepare(`SELECT value FROM router_state WHERE key = 'access_version'`).pluck().get() as string;

it('answers as the live rows do, from one read per access_version, through edits by another connection', () => {
  const { db, path } = freshDb();
  const dir = tempDir();
  for (const g of ['a', 'ab', 'a0', 'a-x', 'a_x', 'k', 'k/c']) addGroup(db, dir, g);
  db.prepare(`UPDATE registered_groups SET actions = 'send delegate' WHERE folder = 'k'`).run();
  const applier = new ActionApplier({ db, log: silentLogger(), tz: 'UTC', maxDepth: 4 });
  const kept = capabilitiesByVersion(new ActionStore(db), (g) => applier.capabilities(g));
  const groups = ['a', 'a/b', 'a/b/c', 'ab', 'ab/c', 'a0', 'a-x', 'k', 'k/c', 'none'];
  const same = () => {
    const v = version(db);
    for (const group of groups)
      expect([group, kept({ group, topic: '' }, v)]).toEqual([group, applier.capabilities(group)]);
  };
  same();
  // Asked again at the same version: no statement at all.
  const v = version(db);
  const sql = countSql();
  try {
    for (const group of groups) kept({ group, topic: '' }, v);
    expect(sql.total()).toBe(0);
  } finally {
    sql.stop();
  }
  // The operator's sqlite3, as in test/queue/actions.test.ts: each change is seen at the next version.
  const operator = new Database(path);
  operator.prepare(`INSERT INTO registered_groups (folder) VALUES ('a/b/c')`).run();
  same();
  operator.prepare(`DELETE FROM registered_groups WHERE folder = 'a'`).run();
  same();
  operator.prepare(`UPDATE registered_groups SET folder = 'ab/c' WHERE folder = 'a/b/c'`).run();
  same();
  operator.prepare(`UPDATE registered_groups SET actions = 'send' WHERE folder = 'k'`).run();
  same();
  operator.close();
  // Without a version (none was read), the live rows.
  expect(kept({ group: 'k', topic: '' }, undefined)).toEqual(applier.capabilities('k'));
});
