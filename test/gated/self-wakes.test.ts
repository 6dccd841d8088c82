/**
 * gated never wakes itself on its own commits (docs/ARCHITECTURE.md, "Stages and who wakes whom"): a message
 * an in-process adapter stores is handed to the poll loop by the `inbound` signal, and each stage after it
 * by the signal of the one before, so one message is one poll-loop step, with the commit watcher off (a
 * network mount) or on. The watcher stays the way another process's commit is seen: a row written on a
 * connection of its own (an operator's sqlite3) is answered with one step more, the watcher's. The poll
 * interval is a minute, so no timer step falls inside the test; steps are counted as /metrics counts them.
 */
import { describe, expect, it } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { politely, sideConnection } from '../helpers/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { startTestGated } from '../helpers/gated.js';
import { packageFile } from '../../core/paths.js';
import { until } from '../helpers/process.js';

const AGENT = packageFile('test', 'queue', 'agents', 'ask-agent.mjs');

async function pollSteps(g: Gated): Promise<number> {
  const { values } = await g.metrics.registry.getSingleMetric('gated_poll_tick_seconds')!.get();
  const count = values.find(
    (v) => (v as { metricName?: string }).metricName === 'gated_poll_tick_seconds_count',
  );
  return count?.value ?? 0;
}

function answers(g: Gated): number {
  return g.db
    .prepare(
      `SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'sent' AND content LIKE '%did turn%'`,
    )
    .pluck()
    .get() as number;
}

async function start(watchCommits: boolean): Promise<Gated> {
  const g = await startTestGated({
    http: false,
    channels: [],
    watchCommits,
    env: { GATED_POLL_MS: '60000', GATED_AGENT_CMD: `THINK_MS=0 exec node "${AGENT}"` },
  });
  addGroup(g.db, g.config.groupsDir, 'ops');
  // The start's own first step is done before the message comes.
  await until(async () => (await pollSteps(g)) > 0, 10_000, 'the first step');
  return g;
}

describe('the poll-loop steps of one message', () => {
  for (const watch of [false, true])
    it(`an in-process adapter's message is answered in one step (commit watcher ${watch ? 'on' : 'off'})`, async () => {
      const g = await start(watch);
      const before = await pollSteps(g);
      await g.gateway.inbound({ chat_jid: 'web:ops', sender: 'u', content: 'hello' });
      await until(() => answers(g) === 1, 10_000, 'the answer delivered');
      expect((await pollSteps(g)) - before).toBe(1);
      if (!watch) return;
      // Another process's commit: only the watcher tells gated of it, and it does, with one step.
      const other = sideConnection(g.config.db);
      try {
        await politely(() => insertInbound(other, { chat_jid: 'web:ops', sender: 'u', content: 'again' }));
      } finally {
        other.close();
      }
      await until(() => answers(g) === 2, 10_000, "the other process's message answered");
      expect((await pollSteps(g)) - before).toBe(2);
    });
});
