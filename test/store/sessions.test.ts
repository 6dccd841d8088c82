import { expect, test } from 'vitest';
import { sessionsOf } from '../../store/sessions.js';
import { freshDb } from '../helpers/db.js';

test("forkSource names the default session only for a topic's first session", () => {
  const { db } = freshDb();
  const sessions = sessionsOf(db);
  const ops = { group: 'g', topic: 'ops' };
  const put = db.prepare(`INSERT INTO sessions (group_folder, topic, session_id) VALUES (?, ?, ?)`);
  const run = db.prepare(
    `INSERT INTO session_log (group_folder, topic, chat_jid, session_id, replies) VALUES (?, ?, 'web:g', ?, ?)`,
  );

  // No default session: nothing to fork.
  expect(sessions.forkSource(ops)).toBeUndefined();
  put.run('g', '', 'main-1');
  expect(sessions.forkSource(ops)).toBe('main-1');
  // The default topic never forks, and another group's default session is not this group's.
  expect(sessions.forkSource({ group: 'g', topic: '' })).toBeUndefined();
  expect(sessions.forkSource({ group: 'h', topic: 'ops' })).toBeUndefined();
  // A run of the topic that failed before answering leaves it new (its retry still forks).
  run.run('g', 'ops', null, 0);
  expect(sessions.forkSource(ops)).toBe('main-1');

  // A topic with a session of its own does not fork, nor one that had a session or answered (/new #ops).
  put.run('g', 'ops', 'ops-1');
  expect(sessions.forkSource(ops)).toBeUndefined();
  expect(sessions.drop(ops)).toBe(true);
  run.run('g', 'ops', 'ops-1', 0);
  expect(sessions.forkSource(ops)).toBeUndefined();
  const other = { group: 'g', topic: 'news' };
  run.run('g', 'news', null, 1);
  expect(sessions.forkSource(other)).toBeUndefined();
});
