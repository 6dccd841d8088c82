/**
 * Memory's store (docs/MEMORY.md) on a real SQLite file: facts bounded per group and per fact, recalled by
 * bm25 only in their group and scopes, audited with their actor, kept in a backup; the history index filled
 * after its cursor behind the poll loop, and searched only within the group and the viewer's reach.
 */
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { listAudit, withActor } from '../../store/audit.js';
import { backupDatabase } from '../../store/backup.js';
import { openDatabase } from '../../store/db.js';
import { MemoryRefused, MemoryStore } from '../../store/memory.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { historyOf } from '../helpers/history.js';

const fact = (group: string, text: string, scope = 'group') => ({
  group,
  scope,
  text,
  provenance: { run: 1, turn: 1, senders: [{ sender: 'telegram:1', role: 'owner' }] },
  actor: 'agent:' + group,
});

test('a fact is recalled by shared words, best first, only in its group and scopes', () => {
  const { db } = freshDb();
  const m = new MemoryStore(db);
  const a = m.remember(fact('club', 'The deploy key lives in the vault')).id;
  const b = m.remember(fact('club', 'Ada prefers short answers about the deploy', 'telegram:7')).id;
  m.remember(fact('other', 'The deploy key lives in the vault'));
  expect(m.recall('where is the deploy key?', { group: 'club', senders: [] }).map((f) => f.id)).toEqual([a]);
  expect(
    m.recall('where is the deploy key?', { group: 'club', senders: ['telegram:7'] }).map((f) => f.id),
  ).toEqual([a, b]);
  expect(m.recall('deploy', { group: 'club', senders: ['telegram:7'], groupFacts: false })).toHaveLength(1);
  // Query syntax of FTS5 in user text is only words.
  expect(m.recall('"deploy" OR grp:* NEAR(', { group: 'club', senders: [] })).toHaveLength(1);
  expect(m.recall('   ', { group: 'club', senders: [] })).toEqual([]);
  // The same text again refreshes the row instead of a second one.
  expect(m.remember(fact('club', 'The deploy key lives in the vault'))).toEqual({ id: a, created: false });
  expect(m.forget(a)).toBe(true);
  expect(m.recall('vault', { group: 'club', senders: [] })).toEqual([]);
  expect(m.forgetScope('club', 'telegram:7')).toBe(1);
  expect(m.list('club')).toEqual([]);
});

test('facts are bounded per group and per fact, with named refusals', () => {
  const { db } = freshDb();
  const m = new MemoryStore(db, { maxFacts: 2, maxFactBytes: 10 });
  m.remember(fact('club', 'one'));
  m.remember(fact('club', 'two'));
  const refused = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      return (err as MemoryRefused).reason;
    }
    return 'stored';
  };
  expect(refused(() => m.remember(fact('club', 'three')))).toBe('memory_full');
  expect(refused(() => m.remember(fact('other', 'éééééé')))).toBe('fact_too_long');
  expect(refused(() => m.remember(fact('other', '  ')))).toBe('fact_empty');
  expect(refused(() => m.remember(fact('other', 'three')))).toBe('stored');
});

test('changes of memories are audited with their actor and a backup keeps them', async () => {
  const { db } = freshDb();
  const m = new MemoryStore(db);
  const id = withActor(
    db,
    'cli:ops',
    () => m.remember(fact('club', 'the wifi password is on the fridge')).id,
  );
  withActor(db, 'chat:telegram:1', () => m.forget(id));
  const rows = listAudit(db).filter((r) => r.subject === 'memories');
  expect(rows.map((r) => [r.action, r.actor, r.row_key])).toEqual(
    expect.arrayContaining([
      ['insert', 'cli:ops', String(id)],
      ['delete', 'chat:telegram:1', String(id)],
    ]),
  );
  m.remember(fact('club', 'kept in the backup'));
  const file = join(tempDir(), 'backup.db');
  await backupDatabase(db, file);
  const copy = openDatabase(file);
  expect(new MemoryStore(copy).recall('backup', { group: 'club', senders: [] })).toHaveLength(1);
  copy.close();
});

test('history is indexed after its cursor once polled, and searched only within the group and reach', () => {
  const { db } = freshDb();
  const { index: h, said, answered, ids: found } = historyOf(db);
  const old = said('club', '7', 'the caravan leaves from platform nine', {
    timestamp: '2026-10-01T10:00:00.000Z',
  });
  const answer = answered(old, 'noted: caravan at platform nine');
  const denied = said('club', '9', 'caravan secret of a stranger', { state: 'denied' });
  said('other', '7', 'caravan of another group');
  const unpolled = said('club', '7', 'caravan not yet polled', { state: null, group_folder: null });
  expect(h.indexNext()).toEqual({ indexed: 4, more: false });
  expect(h.cursor()).toBe(unpolled - 1);
  const ids = (only: string[] | null) => found('caravan', 'club', only);
  expect(ids(null).sort()).toEqual([old, answer].sort());
  // A stranger sees only its own rows and the answers to them.
  expect(ids(['telegram:9'])).toEqual([denied]);
  expect(ids(['telegram:7']).sort()).toEqual([old, answer].sort());
  db.prepare(`UPDATE messages SET state = 'done', group_folder = 'club' WHERE id = ?`).run(unpolled);
  expect(h.indexNext().indexed).toBe(1);
  expect(ids(null)).toContain(unpolled);
  expect(h.behind()).toBe(false);
});
