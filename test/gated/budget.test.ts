/**
 * Daily limits per sender beside the group's (docs/COSTS.md), with a real gated and an agent that reports
 * usage mid-turn (with a tool call's end) and with its answer: `gated access limit --sender` sets them, the
 * access step holds a sender over their own cap while others are served, and the chat is warned once per
 * cap and day when 80 % of one is used, also after a restart on the same database.
 */
import { expect, test } from 'vitest';
import { addGroup } from '../../store/groups.js';
import { gatedCli } from '../helpers/cli.js';
import { closeTestGated, startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { USAGE_AGENT } from '../helpers/usage-agent.js';

test('per-sender caps hold their sender alone; the 80 % warning is sent once per cap and day', async () => {
  const env = { GATED_IDLE_TIMEOUT_MS: '200', GATED_AGENT_CMD: USAGE_AGENT };
  let g = await startTestGated({ channels: [], http: false, env });
  addGroup(g.db, g.config.groupsDir, 'club');
  g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  const path = g.config.db;
  const groups = g.config.groupsDir;
  await gatedCli(path, 'prices', 'set', 'm-test', '3', '15');
  const set = await gatedCli(
    path,
    'access',
    'limit',
    'club',
    '--sender',
    'telegram:ada',
    '--cost-per-day',
    '0.04',
  );
  expect(set.out).toBe('club telegram:ada: runs/day none, cost/day 0.04, tokens/day none\n');
  await gatedCli(path, 'access', 'limit', 'club', '--sender', 'telegram:bob', '--runs-per-day', '1');
  // The group's own token cap: 80 % of 10,000 is crossed with the third run's answer.
  const grp = await gatedCli(path, 'access', 'limit', 'club', '--tokens-per-day', '10000');
  expect(grp.out).toBe('club: sender/hour none, runs/day none, cost/day none, tokens/day 10000\n');
  expect(
    (await gatedCli(path, 'access', 'limit', 'club', '--sender', 'ada', '--runs-per-day', '1')).code,
  ).toBe(2);
  expect(
    (await gatedCli(path, 'access', 'limit', 'club', '--sender', '*', '--sender-per-hour', '1')).code,
  ).toBe(2);

  const list = (await gatedCli(path, 'access', 'list', '--group', 'club')).out;
  expect(list).toContain('\tclub\ttelegram:ada\tnone\t0.04\tnone\n');
  expect(list).toContain('\tclub\ttelegram:bob\t1\tnone\tnone\n');
  expect(list).toContain('10000 tokens/day');

  const state = (id: number) => g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  const said = (chat: string) =>
    g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
      .pluck()
      .all(chat) as string[];
  const send = async (chat: string, sender: string, content: string, end = 'done') => {
    const id = g.gateway.sink({ chat_jid: chat, sender, content })!;
    await until(() => state(id) === end, 15_000, `${sender}: '${content}' ${end}`);
    return id;
  };

  // Ada: $0.033 of her $0.04 (82 %) after one run: warned once, in her chat.
  await send('telegram:-1', 'ada', 'one');
  const adaWarn =
    /^Budget warning: telegram:ada in club has used 82 % of its daily agent cost cap today \(\$0\.0330 of \$0\.04\)\.$/;
  expect(said('telegram:-1').filter((t) => t.startsWith('Budget warning'))).toEqual([
    expect.stringMatching(adaWarn),
  ]);
  // Under the cap still: served, and not warned again.
  await send('telegram:-1', 'ada', 'two');
  expect(said('telegram:-1').filter((t) => t.startsWith('Budget warning'))).toHaveLength(1);
  // The group crossed 80 % of its tokens (6,000 + 1,000 + 2,000 = 9,000) with bob's answer: in bob's chat.
  await send('telegram:-2', 'bob', 'three');
  expect(said('telegram:-2').filter((t) => t.startsWith('Budget warning'))).toEqual([
    'Budget warning: club has used 90 % of its daily agent tokens cap today (9000 tokens of 10000 tokens).',
  ]);
  // Bob's one run a day is used; ada is over her cost: each is held, told once why.
  await send('telegram:-2', 'bob', 'four', 'limited');
  expect(said('telegram:-2').at(-1)).toMatch(/^Limit reached \(1 agent runs per day per sender\)/);
  await send('telegram:-1', 'ada', 'five', 'limited');
  expect(said('telegram:-1').at(-1)).toMatch(/^Limit reached \(\$0\.04 of agent cost per day per sender\)/);

  // A restart on the same database: a sender without a cap spends more, nobody is warned a second time.
  await closeTestGated(g);
  g = await startTestGated({
    channels: [],
    http: false,
    env: { ...env, GATED_DB: path, GATED_GROUPS_DIR: groups },
  });
  await send('telegram:-3', 'cyd', 'six');
  const warnings = g.db
    .prepare(`SELECT chat_jid, content FROM messages WHERE is_from_me = 1 AND content LIKE 'Budget warning%'`)
    .all();
  expect(warnings).toHaveLength(2);
  expect(
    g.db
      .prepare('SELECT group_folder, sender, kind FROM limit_notices WHERE kind LIKE ? ORDER BY kind')
      .all('warn-%'),
  ).toEqual([
    { group_folder: 'club', sender: 'telegram:ada', kind: 'warn-cost' },
    { group_folder: 'club', sender: '', kind: 'warn-tokens' },
  ]);
});
