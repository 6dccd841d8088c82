/** The `forkFrom` field of a run's first line: set only on a topic's first session (docs/PROTOCOL.md). */
import { afterEach, expect, it } from 'vitest';
import type { WorkQueue } from '../../queue/types.js';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready } from './helpers.js';

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(0);
});

it("names the group's default session to a topic without one, and to nobody else", async () => {
  const { db } = freshDb();
  const { queue, runtime } = handQueue(db, {});
  queues.push(queue);
  const session = db.prepare(`INSERT INTO sessions (group_folder, topic, session_id) VALUES (?, ?, ?)`);
  session.run('g1', '', 'main-1');
  session.run('g1', 'old', 'old-1');
  ready(db, { chat: 'tg:A', topic: 'ops', content: 'new topic' });
  ready(db, { chat: 'tg:A', topic: 'old', content: 'topic with a session' });
  ready(db, { chat: 'tg:A', topic: '', content: 'default topic' });
  ready(db, { chat: 'tg:B', group: 'g2', topic: 'ops', content: 'group without a default session' });
  queue.wake();
  await flush();

  const inputs = Object.fromEntries(
    runtime.agents.map((a) => {
      const input = a.inputs()[0]!;
      return [`${input.group}#${input.topic}`, { sessionId: input.sessionId, forkFrom: input.forkFrom }];
    }),
  );
  expect(inputs).toEqual({
    'g1#ops': { sessionId: null, forkFrom: 'main-1' },
    'g1#old': { sessionId: 'old-1', forkFrom: undefined },
    'g1#': { sessionId: 'main-1', forkFrom: undefined },
    'g2#ops': { sessionId: null, forkFrom: undefined },
  });
});
