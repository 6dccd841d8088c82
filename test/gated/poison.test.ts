/**
 * A poison message: one that crashes the agent every time it reads it. The whole gated (real queue, process
 * runtime, real SQLite file, web channel and delivery); the agent is a real process that exits 1 whenever
 * its input holds the word POISON and otherwise answers like the example agent.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

const AGENT = `
import { createInterface } from 'node:readline';
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.includes('POISON')) process.exit(1);
  const input = JSON.parse(line);
  const result = input.messages.map((m) => 'echo: ' + m.content).join('\\n');
  process.stdout.write('---GATED_OUTPUT_START---\\n' + JSON.stringify({ status: 'ok', result, turn: input.turn }) +
    '\\n---GATED_OUTPUT_END---\\n');
});
`;

describe('a poison message', () => {
  it('is parked after the failure limit with one notice, and the chat goes on being served', async () => {
    const dir = tempDir();
    const agent = join(dir, 'poison-agent.mjs');
    writeFileSync(agent, AGENT);
    // The agent runs as the process runtime's own uid: it must be able to reach its script.
    chmodSync(dir, 0o755);
    const g = await startTestGated({
      http: false,
      env: {
        GATED_POLL_MS: '50',
        GATED_RUNTIME: 'process',
        GATED_AGENT_CMD: `exec node ${agent}`,
        GATED_IDLE_TIMEOUT_MS: '200',
      },
      seed: (db, config) => addGroup(db, config.groupsDir, 'team', 'Team'),
    });
    const db = g.db;
    const state = (id: number) =>
      db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id) as string | undefined;
    const out = () =>
      db
        .prepare(`SELECT kind, content, delivery FROM messages WHERE is_from_me = 1 ORDER BY id`)
        .all() as Array<{ kind: string; content: string; delivery: string }>;
    const post = async (content: string) => (await g.web.post({ folder: 'team', topic: '', content }))!;

    const poison = await post('POISON pill');
    await until(() => state(poison) === 'parked', 30_000, 'the poison message parked');
    expect(out().map((o) => o.kind)).toEqual(['error']);

    // Later messages of the same chat are answered; the poison never takes them down with it.
    const later = [await post('hello'), await post('still there?')];
    for (const id of later) await until(() => state(id) === 'done', 30_000, `message ${id} answered`);
    const third = await post('and a third');
    await until(() => state(third) === 'done', 30_000, 'the third message answered');

    const replies = out();
    expect(replies.filter((o) => o.kind === 'error')).toHaveLength(1);
    const echoed = replies
      .filter((o) => o.kind === 'reply')
      .flatMap((o) => o.content.split('\n'))
      .sort();
    expect(echoed).toEqual(['echo: and a third', 'echo: hello', 'echo: still there?']);
    expect(state(poison)).toBe('parked');
    await until(() => out().every((o) => o.delivery === 'sent'), 10_000, 'everything delivered');
  }, 90_000);
});
