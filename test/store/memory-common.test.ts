/**
 * Memory's searches with words most rows share (docs/MEMORY.md, store/fts-terms.ts): such a word is left out
 * when the query has a rarer one, and when every word is that common the newest rows having any are given.
 * Either way a recall reads only its group and the scopes of its senders, a history search only its group
 * and the viewer's reach. "Common" is over 1 % of the rows and over 1,000 of them, so each test first makes
 * 1,200 rows of another group say the word.
 */
import { expect, test } from 'vitest';
import { TermCounts } from '../../store/fts-terms.js';
import { HistoryIndex } from '../../store/history-index.js';
import { MemoryStore } from '../../store/memory.js';
import { freshDb, insertMessage } from '../helpers/db.js';

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

const said = insertMessage;

test('a history search ranks by the rare words, or gives the newest when all are common, within reach', () => {
  const { db } = freshDb();
  const h = new HistoryIndex(db);
  const base = { chat_jid: 'telegram:-1', state: 'done', group_folder: 'club' };
  db.transaction(() => {
    for (let i = 0; i < NOISE; i++)
      said(db, {
        ...base,
        group_folder: 'noise',
        chat_jid: 'telegram:-5',
        sender: '5',
        content: `meeting ${i}`,
      });
  })();
  const first = said(db, { ...base, sender: '7', content: 'the meeting is at the lighthouse' });
  const answer = said(db, {
    chat_jid: 'telegram:-1',
    is_from_me: 1,
    content: 'meeting noted',
    reply_to_id: first,
  });
  const denied = said(db, { ...base, sender: '9', state: 'denied', content: 'a meeting at the lighthouse' });
  const later = said(db, { ...base, sender: '8', content: 'no meeting today' });
  said(db, { ...base, group_folder: 'other', sender: '7', content: 'meeting at the lighthouse elsewhere' });
  while (h.indexNext().more);
  expect(h.behind()).toBe(false);

  const ids = (q: string, only: string[] | null) => h.search(q, { group: 'club', only }).map((x) => x.id);
  // "meeting" is in 1,205 of 1,205 rows: "lighthouse" alone ranks.
  expect(ids('meeting lighthouse', null)).toEqual([first]);
  expect(ids('meeting lighthouse', ['telegram:9'])).toEqual([denied]);
  expect(ids('meeting lighthouse', ['telegram:8'])).toEqual([]);
  // Every word common: the newest of the group's served rows, or of the viewer's own and their answers.
  expect(ids('meeting', null)).toEqual([later, answer, first]);
  expect(ids('meeting', ['telegram:7'])).toEqual([answer, first]);
  expect(ids('meeting', ['telegram:9'])).toEqual([denied]);
  expect(h.search('meeting', { group: 'noise', only: null }, 5).map((x) => x.content)).toEqual(
    [1199, 1198, 1197, 1196, 1195].map((i) => `meeting ${i}`),
  );
});

test('a group far larger than the words it is searched for is checked on the row, with the same reach', () => {
  const { db } = freshDb();
  const h = new HistoryIndex(db);
  const big = { chat_jid: 'telegram:-2', state: 'done', group_folder: 'big' };
  db.transaction(() => {
    for (let i = 0; i < NOISE; i++) said(db, { ...big, sender: '5', content: `meeting ${i}` });
  })();
  const kept = said(db, { ...big, sender: '7', content: 'the lighthouse keeper' });
  const answer = said(db, {
    chat_jid: 'telegram:-2',
    is_from_me: 1,
    content: 'lighthouse noted',
    reply_to_id: kept,
  });
  const denied = said(db, { ...big, sender: '9', state: 'denied', content: 'lighthouse from a stranger' });
  const other = said(db, { ...big, group_folder: 'other', sender: '7', content: 'lighthouse elsewhere' });
  said(db, {
    chat_jid: 'telegram:-2',
    is_from_me: 1,
    content: 'lighthouse answered elsewhere',
    reply_to_id: other,
  });
  while (h.indexNext().more);

  // "lighthouse" is in 5 rows, the group's token in 1,203 (over 100 times more): checked on the row.
  expect(h.plan('lighthouse', { group: 'big', only: null })).toMatchObject({ groupOnRow: true });
  expect(h.plan('lighthouse', { group: 'other', only: null })).toMatchObject({ groupOnRow: false });
  const ids = (group: string, only: string[] | null) =>
    h
      .search('lighthouse', { group, only })
      .map((x) => x.id)
      .sort((a, b) => a - b);
  expect(ids('big', null)).toEqual([kept, answer]);
  expect(ids('big', ['telegram:9'])).toEqual([denied]);
  expect(ids('big', ['telegram:7'])).toEqual([kept, answer]);
  expect(ids('big', ['telegram:7', 'telegram:9'])).toEqual([]);
  expect(ids('other', null)).toEqual([other, other + 1]);
});
