import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, until } from '../helpers/process.js';

describe('gated run across kill -9', () => {
  it('re-runs the interrupted batches after restart: every message answered exactly once', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, {
      GATED_IDLE_TIMEOUT_MS: '300',
      GATED_MAX_CONCURRENT: '2',
      // Slow to start, so runs are in flight when the gateway dies.
      GATED_AGENT_CMD: 'sleep 1; exec node "$GATED_HOME/agents/example/agent.mjs"',
    });
    const dbPath = env.GATED_DB;
    const groups = ['g1', 'g2', 'g3', 'g4'];
    const seed = openDatabase(dbPath);
    for (const g of groups) addGroup(seed, env.GATED_GROUPS_DIR, g);
    const sent: string[] = [];
    for (const g of groups) {
      for (let i = 0; i < 5; i++) {
        const text = `m-${g}-${i}`;
        insertInbound(seed, { chat_jid: `web:${g}`, sender: 'u', content: text });
        sent.push(text);
      }
    }
    seed.close();

    const watch = new Database(dbPath, { readonly: true });
    const count = (sql: string) => watch.prepare(sql).pluck().get() as number;
    const first = gatedRun(env);
    await until(
      () => count(`SELECT count(*) FROM session_log WHERE result IS NULL`) >= 2,
      20_000,
      'runs in flight',
    );
    first.kill('SIGKILL');
    await exited(first);
    expect(count(`SELECT count(*) FROM messages WHERE state = 'running'`)).toBeGreaterThan(0);

    const second = gatedRun(env);
    await until(
      () => count(`SELECT count(*) FROM messages WHERE is_from_me = 0 AND state = 'done'`) === sent.length,
      30_000,
      'every message answered',
    );
    second.kill('SIGTERM');
    expect(await exited(second)).toBe(0);

    const replies = watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
      .pluck()
      .all() as string[];
    const echoed = replies
      .join('\n')
      .split('\n')
      .filter((l) => l.startsWith('echo: '));
    for (const text of sent)
      expect(
        echoed.filter((l) => l === `echo: ${text}`),
        text,
      ).toHaveLength(1);
    expect(echoed).toHaveLength(sent.length);
    const interrupted = count(`SELECT count(*) FROM session_log WHERE error LIKE 'interrupted%'`);
    expect(interrupted).toBeGreaterThanOrEqual(2);
    expect(count(`SELECT count(*) FROM session_log WHERE result IS NULL`)).toBe(0);
    watch.close();
  }, 90_000);
});
