/**
 * The Claude agent's actions as tools and a topic's first session forked from the group's default session,
 * through the whole gateway (process runtime) against the local Messages API server: the scripted model
 * calls a tool with `TOOL <name> <json>` (test/infra/messages-api.ts).
 */
import { expect, test } from 'vitest';
import { until } from '../helpers/process.js';
import { requestFor, useClaudeSuite, type ClaudeChat } from './claude-support.js';

const suite = useClaudeSuite();

const toolNames = (words: string) => (requestFor(suite.api, words).body.tools ?? []).map((t) => t.name);

function repliesTo(c: ClaudeChat, id: number): number {
  return c.gated.db
    .prepare(`SELECT COUNT(*) FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
    .pluck()
    .get(id) as number;
}

test(
  'the model schedules a task and sends to another chat through its tools',
  { timeout: 120_000 },
  async () => {
    const c = await suite.start({ sendAllow: 'web:elsewhere' });

    const asked = c.send('TOOL schedule {"every":"1h","text":"check the backups"}');
    const reply = await c.reply(asked);
    expect(reply).toContain('Tool mcp__gated__schedule said: Recorded: a task (1h)');
    const tasks = c.gated.db
      .prepare(`SELECT group_folder, chat_jid, kind, spec, text, status, created_by FROM tasks`)
      .all();
    expect(tasks).toEqual([
      {
        group_folder: c.group,
        chat_jid: c.chat,
        kind: 'every',
        spec: '1h',
        text: 'check the backups',
        status: 'active',
        created_by: `agent:${c.group}`,
      },
    ]);
    expect(repliesTo(c, asked)).toBe(1);
    // Besides them only the file tools: no shell (the process runtime runs on the host), no web access.
    const offered = toolNames('TOOL schedule');
    expect(offered).toContain('Write');
    for (const no of ['Bash', 'WebFetch', 'WebSearch', 'Task', 'Agent']) expect(offered).not.toContain(no);
    // No delegate or escalate: the group has neither a child nor a parent.
    expect(
      toolNames('TOOL schedule')
        .filter((n) => n.startsWith('mcp__'))
        .sort(),
    ).toEqual([
      'mcp__gated__attach',
      'mcp__gated__forget',
      'mcp__gated__react',
      'mcp__gated__recall',
      'mcp__gated__remember',
      'mcp__gated__schedule',
      'mcp__gated__search_history',
      'mcp__gated__send',
    ]);

    const sent = c.send('TOOL send {"chat_jid":"web:elsewhere","text":"hello over there"}');
    expect(await c.reply(sent)).toContain('Recorded: a message to web:elsewhere');
    const out = await until(
      () =>
        c.gated.db
          .prepare(`SELECT content FROM messages WHERE chat_jid = 'web:elsewhere' AND is_from_me = 1`)
          .pluck()
          .all() as string[],
    );
    expect(out).toEqual(['hello over there']);
    expect(repliesTo(c, sent)).toBe(1);
    const applied = c.gated.db.prepare(`SELECT type, status FROM actions ORDER BY id`).all();
    expect(applied).toEqual([
      { type: 'schedule', status: 'applied' },
      { type: 'send', status: 'applied' },
    ]);

    // gated, not the agent, decides: a send to a chat of no group is refused, and the model reads why in
    // the next turn (a system note in front of the messages).
    const refused = c.send('TOOL send {"chat_jid":"web:nowhere","text":"psst"}');
    expect(await c.reply(refused)).toContain('Recorded: a message to web:nowhere');
    const after = c.send('did it go out');
    expect(await c.reply(after)).toBe('echo: did it go out');
    const note = JSON.stringify(requestFor(suite.api, 'did it go out').body.messages.at(-1));
    expect(note).toMatch(/<system>Your send action was not applied: chat 'web:nowhere' does not reach/);
    const nowhere = c.gated.db.prepare(`SELECT COUNT(*) FROM messages WHERE chat_jid = 'web:nowhere'`);
    expect(nowhere.pluck().get()).toBe(0);
    const last = c.gated.db.prepare(`SELECT status FROM actions ORDER BY id DESC LIMIT 1`);
    expect(last.pluck().get()).toBe('refused');
  },
);

test('a capability the group does not have is not offered as a tool', { timeout: 120_000 }, async () => {
  const c = await suite.start({ actions: 'react' });
  const asked = c.send('TOOL schedule {"every":"1h","text":"check the backups"}');
  expect(await c.reply(asked)).toBe('no tool schedule');
  // The attach tool is always there (files are not an action gated applies).
  expect(
    toolNames('TOOL schedule')
      .filter((n) => n.startsWith('mcp__'))
      .sort(),
  ).toEqual(['mcp__gated__attach', 'mcp__gated__react', 'mcp__gated__recall', 'mcp__gated__search_history']);
  expect(c.gated.db.prepare(`SELECT COUNT(*) FROM tasks`).pluck().get()).toBe(0);
});

test('a delegation to a child group comes back to the session that asked', { timeout: 120_000 }, async () => {
  const c = await suite.start({ children: ['research'] });
  const asked = c.send('TOOL delegate {"group":"research","text":"find three sources"}');
  expect(await c.reply(asked)).toContain('Recorded: work for research');
  expect(toolNames('TOOL delegate')).toContain('mcp__gated__delegate');
  expect(toolNames('TOOL delegate')).not.toContain('mcp__gated__escalate');

  // The child's agent answers the work; its answer reaches the parent's session as a `delegation` message,
  // which the parent answers in its chat.
  const back = await until(
    () =>
      c.gated.db
        .prepare(
          `SELECT content FROM messages WHERE chat_jid = ? AND is_from_me = 1 AND content LIKE '%echo: find three%'`,
        )
        .pluck()
        .get(c.chat) as string | undefined,
    60_000,
    "the child's answer back in the parent's chat",
  );
  expect(back).toContain('echo: find three sources');
  // The child's own session (working in the child's folder) got the text of the delegation.
  const child = suite.api.turns.filter((r) => JSON.stringify(r.body).includes('/groups/claude+research'));
  expect(child.length).toBeGreaterThan(0);
  expect(suite.api.seenUserWords(child[0]!)).toEqual(['find three sources']);
  const parent = requestFor(suite.api, 'echo: find three sources');
  expect(JSON.stringify(parent.body.messages.at(-1))).toContain('verb=\\"delegation\\"');
});

test("a topic's first run forks the group's default session", { timeout: 120_000 }, async () => {
  const c = await suite.start();
  const sessionOf = (topic: string) =>
    c.gated.db
      .prepare(`SELECT session_id FROM sessions WHERE group_folder = ? AND topic = ?`)
      .pluck()
      .get(c.group, topic) as string | undefined;

  const first = c.send('remember the word tulip');
  expect(await c.reply(first)).toBe('echo: remember the word tulip');
  const main = sessionOf('')!;
  expect(main).toMatch(/^[0-9a-f-]{36}$/);

  const inTopic = c.send('#ops which word was it');
  expect(await c.reply(inTopic)).toBe('echo: which word was it');
  // The SDK resumed the default session's transcript: the model saw its earlier turn.
  expect(suite.api.seenUserWords(requestFor(suite.api, 'which word was it')).join('\n')).toContain(
    'remember the word tulip',
  );
  const topic = await until(() => sessionOf('ops'));
  expect(topic).toMatch(/^[0-9a-f-]{36}$/);
  expect(topic).not.toBe(main);
  expect(sessionOf('')).toBe(main);

  // The fork wrote its own session: the default session does not see the topic's turn.
  const back = c.send('back in the main thread');
  expect(await c.reply(back)).toBe('echo: back in the main thread');
  const mainWords = suite.api.seenUserWords(requestFor(suite.api, 'back in the main thread')).join('\n');
  expect(mainWords).toContain('remember the word tulip');
  expect(mainWords).not.toContain('which word was it');

  // `/new #ops` makes the topic start fresh, not from the default session again.
  c.send('/new #ops');
  await until(() => sessionOf('ops') === undefined);
  const fresh = c.send('#ops a fresh start');
  expect(await c.reply(fresh)).toBe('echo: a fresh start');
  expect(suite.api.seenUserWords(requestFor(suite.api, 'a fresh start')).join('\n')).not.toContain('tulip');
});
