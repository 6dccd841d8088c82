import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { startGated } from '../../gated/app.js';
import { addGroup } from '../../store/groups.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

/** A whole gated on a temp folder: process runtime, the example agent, HTTP on an ephemeral port. */
function start() {
  return startTestGated({ channels: [], demo: true, env: { GATED_IDLE_TIMEOUT_MS: '500' } });
}

describe('startGated', () => {
  it('answers a web chat message with the example agent, end to end', async () => {
    const g = await start();
    // The demo group gated registered itself is audited as gated's, not as an anonymous 'sql' edit.
    expect(
      g.db.prepare(`SELECT actor FROM audit WHERE subject = 'registered_groups' AND row_key = 'demo'`).all(),
    ).toEqual([{ actor: 'gated' }]);
    const id = g.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'hello agent' })!;
    const reply = await until(
      () =>
        g.db
          .prepare(`SELECT content, delivery FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
          .get(id) as { content: string; delivery: string } | undefined,
    );
    expect(reply.content).toContain('hello agent');
    await until(
      () => g.db.prepare(`SELECT delivery FROM messages WHERE reply_to_id = ?`).pluck().get(id) === 'sent',
    );
    expect(g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id)).toBe('done');
    // Idle for 500 ms, the agent gets EOF and exits 0: the run is logged as ok, with its session id kept.
    const run = await until(
      () =>
        g.db
          .prepare(
            'SELECT group_folder, topic, result, error, session_id FROM session_log WHERE result IS NOT NULL',
          )
          .get() as Record<string, unknown> | undefined,
      10_000,
      'the run to finish',
    );
    // The first run started without a session; the one the agent announced names the run and is kept for
    // the next run.
    expect(run).toMatchObject({ group_folder: 'demo', topic: '', result: 'ok', error: null });
    expect(run.session_id).toMatch(/^example-/);
    expect(g.db.prepare(`SELECT session_id FROM sessions WHERE group_folder = 'demo'`).pluck().get()).toBe(
      run.session_id,
    );
  });

  it('serves HTTP on the configured port and refuses a second gated on the same database', async () => {
    const g = await start();
    expect(g.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+/);
    const res = await fetch(`${g.url}/healthz`);
    expect(res.status).toBe(200);
    await expect(startGated({ config: g.config, log: silentLogger(), channels: [] })).rejects.toThrow(
      /another gated/,
    );
  });

  it('routes a telegram-less instance through the routes table to a registered group', async () => {
    const g = await start();
    addGroup(g.db, g.config.groupsDir, 'krons/content');
    g.db
      .prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'room=-5075870332', 'krons/content')`)
      .run();
    const id = g.gateway.sink({ chat_jid: 'telegram:-5075870332', sender: '42', content: 'via routes' })!;
    const reply = await until(
      () =>
        g.db
          .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
          .pluck()
          .get(id) as string,
    );
    expect(reply).toContain('via routes');
    // No telegram channel runs here: the reply waits in the outbox, undelivered, not lost.
    expect(g.db.prepare(`SELECT delivery FROM messages WHERE reply_to_id = ?`).pluck().get(id)).toBe(
      'pending',
    );
  });
});
