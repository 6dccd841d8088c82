import { describe, expect, it } from 'vitest';
import { setLimits, upsertMember } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

/** A whole gated (process runtime, the example agent that echoes each message) with group `club`. */
async function start(access: string, env: Record<string, string> = {}) {
  const g = await startTestGated({
    channels: [],
    http: false,
    env: { GATED_IDLE_TIMEOUT_MS: '300', ...env },
  });
  addGroup(g.db, g.config.groupsDir, 'club');
  g.db.prepare(`UPDATE registered_groups SET access = ? WHERE folder = 'club'`).run(access);
  g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  const replies = (chat: string) =>
    g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
      .pluck()
      .all(chat) as string[];
  const state = (id: number) => g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  return { g, replies, state };
}

describe('access, end to end with a real agent', () => {
  it('members: the member is answered by the agent, the stranger is denied and never reaches it', async () => {
    const { g, replies, state } = await start('members');
    upsertMember(g.db, 'club', 'telegram:alice', 'member');
    const s = g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'mallory', content: 'secret plans?' })!;
    const m = g.gateway.sink({ chat_jid: 'telegram:-2', sender: 'alice', content: 'hi agent' })!;
    await until(() => state(m) === 'done', 15_000, 'the member answered');
    expect(replies('telegram:-2')).toEqual(['echo: hi agent']);
    expect(state(s)).toBe('denied');
    expect(replies('telegram:-1')).toEqual([]);
    const ran = g.db.prepare(`SELECT count(*) FROM session_log WHERE chat_jid = 'telegram:-1'`).pluck().get();
    expect(ran).toBe(0);
  });

  it('approval: code, /approve by an owner, then the earlier messages are answered in order', async () => {
    const { g, replies, state } = await start('approval');
    upsertMember(g.db, 'club', 'telegram:owner', 'owner');
    const chat = 'telegram:-7';
    const ids = ['one', 'two', 'three'].map((content) =>
      g.gateway.sink({ chat_jid: chat, sender: 'newbie', content })!,
    );
    const notice = await until(() => replies(chat)[0], 10_000, 'the pairing code');
    const code = /code is ([A-Z0-9]{8})/.exec(notice)![1]!;
    await until(() => ids.every((id) => state(id) === 'pending'), 10_000, 'pending rows');
    expect(g.db.prepare('SELECT count(*) FROM session_log').pluck().get()).toBe(0);

    g.gateway.sink({ chat_jid: 'telegram:999', sender: 'owner', content: `/approve ${code}` });
    await until(() => ids.every((id) => state(id) === 'done'), 15_000, 'the released rows answered');
    const answered = replies(chat).filter((r) => r.startsWith('echo:'));
    expect(answered.join('\n')).toBe('echo: one\necho: two\necho: three');
    expect(replies('telegram:999').at(-1)).toMatch(/approved telegram:newbie .*3 messages released/);
  });

  it('cost per day: the usage agents report is summed on session_log; past the cap messages are limited', async () => {
    // An agent that answers every line with a block costing $0.02.
    const block =
      '{"status":"ok","result":"costly answer","usage":{"input_tokens":10,"output_tokens":5,"cost_usd":0.02}}';
    const cmd = `while IFS= read -r line; do printf '%s\\n' '---GATED_OUTPUT_START---' '${block}' '---GATED_OUTPUT_END---'; done`;
    const { g, replies, state } = await start('open', { GATED_AGENT_CMD: cmd });
    setLimits(g.db, 'club', { senderPerHour: null, runsPerDay: null, costPerDayUsd: 0.01 });
    const first = g.gateway.sink({ chat_jid: 'telegram:-3', sender: 'bob', content: 'expensive question' })!;
    await until(() => state(first) === 'done', 15_000, 'the first answer');
    const usage = await until(
      () =>
        g.db
          .prepare('SELECT input_tokens, output_tokens, cost_usd FROM session_log WHERE cost_usd > 0')
          .get() as { input_tokens: number; output_tokens: number; cost_usd: number } | undefined,
      10_000,
      'usage on session_log',
    );
    expect(usage).toEqual({ input_tokens: 10, output_tokens: 5, cost_usd: 0.02 });
    const second = g.gateway.sink({ chat_jid: 'telegram:-3', sender: 'bob', content: 'another one' })!;
    await until(() => state(second) === 'limited', 10_000, 'the second limited');
    expect(replies('telegram:-3').at(-1)).toMatch(/Limit reached \(\$0\.01 of agent cost per day\)/);
  });
});
