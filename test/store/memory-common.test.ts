/**
 * Memory's searches with words most rows share (docs/MEMORY.md, store/fts-terms.ts): such a word is left out
 * when the query has a rarer one, and when every word is that common the newest rows having any are given.
 * Either way a recall reads only its group and the scopes of its senders, a history search only its group
 * and the viewer's reach. "Common" is over 1 % of the rows and over 1,000 of them, so each test first makes
 * 1,200 rows of another group say the word.
 */
import { expect, test } from 'vitest';
import { TermCounts } from '../../store/fts-terms.js';
import { MemoryStore } from '../../store/memory.js';
import { freshDb } from '../helpers/db.js';
import { historyOf } from '../helpers/history.js';

const NOISE = 1200;

function remember(m: MemoryStore, group: string, text: string, scope = 'group'): number {
  return m.remember({ group, scope, text, provenance: { by: 'test' }, actor: 'test' }).id;
}

test('a recall ranks by the rare words of its query, and never reads another group or sender', () => {
  const { db } = freshDb();
  const m = new MemoryStore(db, { maxFacts: NOISE, maxFactBytes: 2048 });
  db.transaction(() => {
    for (let i = 0; i < NOISE; i++) remember(m, 'noise', `the weekly meeting number ${i}`);
  })();
  const room = remember(m, 'club', 'the meeting room code is 4711 by the orchid');
  const plain = remember(m, 'club', 'the meeting moved to thursday');
  const hers = remember(m, 'club', 'she brings an orchid to every meeting', 'telegram:7');
  remember(m, 'club', 'his orchid is a secret of the meeting', 'telegram:9');
  remember(m, 'other', 'the orchid meeting of another group');

  // "meeting" is in 1,204 of 1,205 facts: left out, so "orchid" alone ranks.
  const counts = new TermCounts(db, 'memories_fts', 'text', 0.01, () => 1205);
  expect(counts.telling(['meeting', 'orchid'])).toMatchObject({ words: ['orchid'], ranked: true });
  const ids = (q: string, senders: string[], groupFacts?: boolean) =>
    m.recall(q, { group: 'club', senders, ...(groupFacts === false ? { groupFacts } : {}) }).map((f) => f.id);
  expect(ids('meeting orchid', [])).toEqual([room]);
  expect(ids('meeting orchid', ['telegram:7']).sort()).toEqual([room, hers].sort());
  expect(ids('meeting orchid', ['telegram:7'], false)).toEqual([hers]);
  expect(m.search('club', 'meeting orchid').length).toBe(3);

  // Every word common: the newest facts having it, still only the group's and the sender's.
  expect(counts.telling(['meeting', 'weekly'])).toMatchObject({
    words: ['meeting', 'weekly'],
    ranked: false,
  });
  expect(ids('meeting', [])).toEqual([plain, room]);
  expect(ids('meeting', ['telegram:7'])).toEqual([hers, plain, room]);
  expect(ids('weekly', [])).toEqual([]);
  expect(new MemoryStore(db).recall('meeting weekly', { group: 'noise', senders: [] }, 3)).toHaveLength(3);
});

test('a word no fact had is looked for again once a fact has it', () => {
  const { db } = freshDb();
  const m = new MemoryStore(db);
  remember(m, 'club', 'the deploy key is in the vault');
  expect(m.recall('where is the zeppelin', { group: 'club', senders: [] })).toEqual([]);
  const id = remember(m, 'club', 'the zeppelin lands at noon');
  expect(m.recall('where is the zeppelin', { group: 'club', senders: [] }).map((f) => f.id)).toEqual([id]);
});

test('a history search ranks by the rare words, or gives the newest when all are common, within reach', () => {
  const { db } = freshDb();
  const { index, said, answered, indexAll, ids } = historyOf(db);
  db.transaction(() => {
    for (let i = 0; i < NOISE; i++) said('noise', '5', `meeting ${i}`, { chat_jid: 'telegram:-5' });
  })();
  const first = said('club', '7', 'the meeting is at the lighthouse');
  const answer = answered(first, 'meeting noted');
  const denied = said('club', '9', 'a meeting at the lighthouse', { state: 'denied' });
  const later = said('club', '8', 'no meeting today');
  said('other', '7', 'meeting at the lighthouse elsewhere');
  indexAll();
  expect(index.behind()).toBe(false);

  // "meeting" is in 1,205 of 1,205 rows: "lighthouse" alone ranks.
  expect(ids('meeting lighthouse', 'club')).toEqual([first]);
  expect(ids('meeting lighthouse', 'club', ['telegram:9'])).toEqual([denied]);
  expect(ids('meeting lighthouse', 'club', ['telegram:8'])).toEqual([]);
  // Every word common: the newest of the group's served rows, or of the viewer's own and their answers.
  expect(ids('meeting', 'club')).toEqual([later, answer, first]);
  expect(ids('meeting', 'club', ['telegram:7'])).toEqual([answer, first]);
  expect(ids('meeting', 'club', ['telegram:9'])).toEqual([denied]);
  expect(index.search('meeting', { group: 'noise', only: null }, 5).map((x) => x.content)).toEqual(
    [1199, 1198, 1197, 1196, 1195].map((i) => `meeting ${i}`),
  );
});

test('a group holding most of the history is checked on the row, with the same reach', () => {
  const { db } = freshDb();
  const { index, said, answered, indexAll, ids } = historyOf(db);
  db.transaction(() => {
    // "harbour" in every tenth row of the group: 120 rows, the group's token in 1,200 of about 1,210.
    for (let i = 0; i < NOISE; i++) said('big', '5', i % 10 === 0 ? `harbour ${i}` : `meeting ${i}`);
  })();
  const kept = said('big', '7', 'the harbour keeper');
  const answer = answered(kept, 'harbour noted');
  const denied = said('big', '9', 'harbour from a stranger', { state: 'denied' });
  const other = said('other', '7', 'harbour elsewhere');
  const otherAnswer = answered(other, 'harbour answered elsewhere');
  indexAll();

  // 2 to find among 125 rows of the word, the group nearly all of the index: checked on the row.
  expect(index.plan('harbour', { group: 'big', only: null }, 2)).toMatchObject({ groupOnRow: true });
  expect(index.plan('harbour', { group: 'other', only: null }, 2)).toMatchObject({ groupOnRow: false });
  expect(index.plan('keeper', { group: 'big', only: null }, 2)).toMatchObject({ groupOnRow: false });
  // Newest first among equals: the other group's two and the denied row are passed over on the row.
  expect(ids('harbour', 'big', null, 2)).toEqual([answer, kept]);
  expect(ids('harbour', 'big', ['telegram:9'], 2)).toEqual([denied]);
  expect(ids('harbour', 'big', ['telegram:7'], 2)).toEqual([answer, kept]);
  expect(ids('harbour', 'big', ['telegram:7', 'telegram:9'], 2)).toEqual([]);
  expect(ids('harbour', 'other', null, 2)).toEqual([otherAnswer, other]);
  // Two rare words rank above one, however new the row of one.
  expect(ids('harbour keeper', 'big', null, 2)).toEqual([kept, answer]);
});

test("a search of a large group whose words are mostly another group's still finds the group's rows", () => {
  const { db } = freshDb();
  const { index, said, indexAll, ids } = historyOf(db);
  const mine = said('big', '7', 'anchor here', { chat_jid: 'telegram:-2' });
  db.transaction(() => {
    for (let i = 0; i < NOISE; i++) said('big', '5', `meeting ${i}`, { chat_jid: 'telegram:-2' });
    // Newer than the group's own row and of the same score: each is passed over on the row, until the
    // search is made again with the group inside the MATCH.
    for (let i = 0; i < 200; i++) said('small', '5', `anchor ${i}`, { chat_jid: 'telegram:-3' });
  })();
  indexAll();
  expect(index.plan('anchor', { group: 'big', only: null }, 2)).toMatchObject({ groupOnRow: true });
  expect(ids('anchor', 'big', null, 2)).toEqual([mine]);
  expect(ids('anchor', 'big', ['telegram:7'], 2)).toEqual([mine]);
  expect(ids('anchor', 'small', null, 3)).toHaveLength(3);
});
