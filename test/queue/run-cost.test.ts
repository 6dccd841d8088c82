import { afterEach, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import type { WorkQueue } from '../../queue/types.js';
import { countSql } from '../../bench/sql-count.js';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready } from './helpers.js';

// What one run costs in SQL (issue 49): a regression in the statements of a run's start, answer and end
// fails here before it shows in a burst's CPU (bench/per-run.ts).
const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(0);
});

const calls = (sql: ReturnType<typeof countSql>, prefix: string) =>
  sql
    .top(1000)
    .filter((s) => s.sql.startsWith(prefix))
    .reduce((n, s) => n + s.calls, 0);

it('a one-message run takes at most 41 statements from its dispatch to its end, one read of its group row', async () => {
  const { db } = freshDb();
  db.prepare(`INSERT INTO registered_groups (folder) VALUES ('g1')`).run();
  const h = handQueue(db, { maxConcurrent: 5 });
  queues.push(h.queue);
  ready(db, { chat: 'tg:1', group: 'g1' });
  const sql = countSql();
  try {
    h.queue.wake();
    await flush(20);
    const agent = h.runtime.agents[0]!;
    agent.reply('done');
    await flush(20);
    agent.finish();
    await flush(20);
    expect(db.prepare('SELECT result FROM session_log').pluck().get()).toBe('ok');
    expect(calls(sql, 'SELECT image, network, mounts, busy')).toBe(1);
    // Its agent and model came with that row; it asked about no tool, so its end seals none.
    expect(calls(sql, 'SELECT agent, model FROM registered_groups')).toBe(0);
    expect(calls(sql, 'SELECT * FROM tool_calls')).toBe(0);
    // Its capabilities from the groups read once for this access_version, none of its own rows.
    expect(calls(sql, 'SELECT send_allow, actions FROM registered_groups')).toBe(0);
    expect(calls(sql, 'SELECT 1 FROM registered_groups')).toBe(0);
    expect(sql.total()).toBeLessThanOrEqual(41);
  } finally {
    sql.stop();
  }
});

it("a group's next run reads no row for its capabilities; another connection's edit is seen by the run after", async () => {
  const { db, path } = freshDb();
  db.prepare(`INSERT INTO registered_groups (folder, actions) VALUES ('g1', 'send')`).run();
  const h = handQueue(db, { maxConcurrent: 5 });
  queues.push(h.queue);
  const runOnce = async () => {
    ready(db, { chat: 'tg:1', group: 'g1' });
    h.queue.wake();
    await flush(20);
    const agent = h.runtime.agents.at(-1)!;
    agent.reply('done');
    await flush(20);
    agent.finish();
    await flush(20);
    return agent.inputs()[0]!.capabilities;
  };
  expect(await runOnce()).toEqual(['send']);
  const sql = countSql();
  try {
    expect(await runOnce()).toEqual(['send']);
    expect(calls(sql, 'SELECT send_allow, actions FROM registered_groups')).toBe(0);
  } finally {
    sql.stop();
  }
  // An operator's sqlite3: the triggers bump access_version, which the next batch reads with its rows.
  const other = new Database(path);
  other.prepare(`UPDATE registered_groups SET actions = 'send react' WHERE folder = 'g1'`).run();
  other.close();
  expect(await runOnce()).toEqual(['send', 'react']);
});
