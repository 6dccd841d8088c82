/**
 * The 80 % warning (docs/COSTS.md) across a kill -9: a real `gated run` child whose agent reports priced
 * usage mid-turn and with its answer. The group's daily cost cap is $0.20 and each run spends $0.033, so the
 * fifth run's answer crosses 80 % and the chat is warned; gated is then killed with -9 (and the run's
 * agent with it, as with the machine), started again on the same database, and a sixth run (99 %, still
 * under the cap) is served without a second warning: the notice was stored with the report.
 */
import { expect, test } from 'vitest';
import Database from 'better-sqlite3';
import { setLimits } from '../../store/access.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { usageOf } from '../../store/usage.js';
import { killRun } from '../agents/crash-support.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { USAGE_AGENT } from '../helpers/usage-agent.js';

test('the 80 % warning is sent once per day, not again after gated was killed with -9', async () => {
  const dir = tempDir('gated-budget-crash-');
  const env = gatedEnv(dir, { GATED_AGENT_CMD: USAGE_AGENT, GATED_IDLE_TIMEOUT_MS: '200' });
  const seed = openDatabase(env.GATED_DB);
  addGroup(seed, env.GATED_GROUPS_DIR, 'club');
  seed.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  usageOf(seed).setPrice('m-test', 3, 15);
  setLimits(seed, 'club', { senderPerHour: null, runsPerDay: null, costPerDayUsd: 0.2, tokensPerDay: null });
  const watch = new Database(env.GATED_DB, { readonly: true });
  const state = (id: number) => watch.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  const warnings = () =>
    watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE 'Budget warning%'`)
      .pluck()
      .all() as string[];
  const send = async (content: string) => {
    const id = insertInbound(seed, { chat_jid: 'telegram:-1', sender: 'ada', content })!;
    await until(() => state(id) === 'done', 20_000, `'${content}' answered`);
  };
  const groupDir = `${env.GATED_GROUPS_DIR}/club`;
  try {
    let gated = await gatedUp(gatedRun(env));
    for (const n of [1, 2, 3, 4]) await send(`run ${n}`);
    expect(warnings()).toEqual([]);
    await send('run 5');
    const warned = await until(() => warnings()[0], 10_000, 'the warning');
    expect(warned).toBe(
      'Budget warning: club has used 82 % of its daily agent cost cap today ($0.1650 of $0.2).',
    );
    gated.kill('SIGKILL');
    await exited(gated);
    await killRun(groupDir, /GATED_OUTPUT_START/);

    gated = await gatedUp(gatedRun(env));
    await send('run 6');
    const cost = watch.prepare('SELECT round(sum(cost_usd), 6) FROM usage_reports').pluck().get();
    expect(cost).toBe(0.198);
    expect(warnings()).toEqual([warned]);
    expect(watch.prepare(`SELECT sender, kind FROM limit_notices WHERE kind LIKE 'warn-%'`).all()).toEqual([
      { sender: '', kind: 'warn-cost' },
    ]);
    gated.kill('SIGTERM');
    await exited(gated);
  } finally {
    watch.close();
    seed.close();
  }
}, 120_000);
