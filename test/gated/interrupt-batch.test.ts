/**
 * A bare `/interrupt` is meant for the turn in progress when it was sent (docs/PROTOCOL.md), even when the
 * poll takes it in one batch with the sender's next message: that message is the next turn, and the
 * interrupt must not name it (an agent stops every turn up to the one an interrupt names, so the new
 * message would be cut before it was ever worked on). The whole gateway, the process runtime and the turn
 * agent (test/queue/agents/turn-agent.mjs), which logs every line it reads; both rows are written in one
 * transaction by another connection, as an adapter that stores a platform's update of two messages would.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { E2E_ENV, seedGroups } from '../channels/support.js';
import { politely, sideConnection } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

const CHAT = 'discord:42';

interface AgentEvent {
  ev: string;
  turn?: number;
  ids?: number[];
}

test('a bare /interrupt in one batch with the next message interrupts the turn in progress, not that message', async () => {
  const g = await startTestGated({
    http: false,
    env: {
      ...E2E_ENV,
      GATED_IDLE_TIMEOUT_MS: '30000',
      GATED_AGENT_CMD: `TURN_MS=1500 exec node "$GATED_HOME/test/queue/agents/turn-agent.mjs"`,
    },
    seed: (db, config) =>
      seedGroups(db, config.groupsDir, { groups: [['g1', 'G1']], routes: [[0, '', 'g1']] }),
  });
  const logFile = join(g.config.groupsDir, 'g1', 'agent-log.jsonl');
  const events = (): AgentEvent[] =>
    existsSync(logFile)
      ? readFileSync(logFile, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as AgentEvent)
      : [];
  // In this thread, beside the test's gated: each write yields while gated holds the lock (politely).
  const adapter = sideConnection(g.config.db);
  const insert = adapter.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES (?, 'u', ?)`);
  try {
    // A first turn answered at once: gated knows then that the agent numbers its turns (only such agents
    // are sent interrupts); the second is in progress when the batch comes.
    await politely(() => insert.run(CHAT, 'hello #slow=10'));
    await until(() => events().some((e) => e.ev === 'answer' && e.turn === 1), 15_000, 'turn 1 answered');
    await politely(() => insert.run(CHAT, 'write a long essay #slow=8000'));
    await until(() => events().some((e) => e.ev === 'line' && e.turn === 2), 15_000, 'turn 2 read');
    const ids = await politely(() =>
      adapter.transaction(() => [
        Number(insert.run(CHAT, '/interrupt').lastInsertRowid),
        Number(insert.run(CHAT, 'stop that, do Y instead').lastInsertRowid),
      ])(),
    );
    await until(() => events().some((e) => e.ev === 'interrupt'), 15_000, 'an interrupt line');
    await until(
      () => events().some((e) => e.ev === 'line' && e.ids?.includes(ids[1]!)),
      15_000,
      'the next turn',
    );
    const interrupt = events().find((e) => e.ev === 'interrupt')!;
    const next = events().find((e) => e.ev === 'line' && e.ids?.includes(ids[1]!))!;
    expect(interrupt.turn).toBe(2);
    expect(next.turn).toBe(3);
    const answer = g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
      .pluck()
      .all(ids[0]);
    expect(answer).toEqual(['interrupting g1']);
  } finally {
    adapter.close();
  }
}, 40_000);
