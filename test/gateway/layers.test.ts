import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { insertInbound } from '../../store/messages.js';
import { parseCommand } from '../../gateway/layers/commands.js';
import { freshDb } from '../helpers/db.js';
import { answers, EXAMPLE_GROUPS, loadExampleRoutes, row, testGateway } from '../helpers/gateway.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const TG = 'telegram:-100';

/** A gateway on a fresh db with the example routes; `send` stores rows and runs one tick. */
function setup(opts: { admins?: string[]; groups?: string[] } = {}) {
  const { db, reopen } = freshDb();
  loadExampleRoutes(db);
  const t = testGateway(db, {
    groups: opts.groups ?? [...EXAMPLE_GROUPS, 'rhias/mentions/deep'],
    admins: opts.admins ?? [],
  });
  t.gateway.start();
  const send = async (
    content: string,
    chat = TG,
    extra: { verb?: string; sender?: string; topic?: string } = {},
  ) => {
    const id = insertInbound(db, {
      chat_jid: chat,
      sender: extra.sender ?? 'u1',
      content,
      verb: extra.verb ?? 'message',
      topic: extra.topic ?? '',
    })!;
    await vi.advanceTimersByTimeAsync(2000);
    return id;
  };
  return { db, reopen, ...t, send };
}

describe('layer 1: sticky', () => {
  it('@name sets the sticky group, later messages follow it, a bare @ resets', async () => {
    const { db, send, gateway } = setup();
    const set = await send('@krons/notifs');
    expect(row(db, set).state).toBe('command');
    expect(answers(db, TG).at(-1)).toMatch(/now go to @krons\/notifs/);
    const m = await send('hello');
    expect(row(db, m)).toMatchObject({ group_folder: 'krons/notifs', session_topic: '', content: 'hello' });
    await send('@');
    expect(answers(db, TG).at(-1)).toMatch(/cleared/);
    const m2 = await send('hello again');
    expect(row(db, m2).group_folder).toBe('default/firehose');
    gateway.stop();
  });

  it('#topic sets the sticky topic; # resets it', async () => {
    const { db, send, gateway } = setup();
    await send('#support');
    const m = await send('help me');
    expect(row(db, m)).toMatchObject({ group_folder: 'default/firehose', session_topic: 'support' });
    await send('#');
    const m2 = await send('thanks');
    expect(row(db, m2).session_topic).toBe('');
    gateway.stop();
  });

  it('@unknown is answered with an error and changes nothing', async () => {
    const { db, send, gateway } = setup();
    await send('@nobody');
    expect(answers(db, TG).at(-1)).toMatch(/unknown group '@nobody'/);
    const m = await send('hi');
    expect(row(db, m).group_folder).toBe('default/firehose');
    gateway.stop();
  });

  it('resolves @name as a child of the chat group first', async () => {
    const { db, send, gateway } = setup();
    // telegram mentions route to rhias/mentions; @deep is its child.
    const s = await send('@deep', TG, { verb: 'mention' });
    expect(row(db, s).state).toBe('command');
    const m = await send('x');
    expect(row(db, m).group_folder).toBe('rhias/mentions/deep');
    gateway.stop();
  });

  it('is persisted across a restart', async () => {
    const { db, reopen, send, gateway } = setup();
    await send('@krons/notifs');
    gateway.stop();
    const db2 = reopen();
    const { gateway: g2 } = testGateway(db2);
    g2.start();
    const id = insertInbound(db2, { chat_jid: TG, sender: 'u', content: 'after restart' })!;
    await vi.advanceTimersByTimeAsync(2000);
    expect(row(db2, id).group_folder).toBe('krons/notifs');
    g2.stop();
    db.close();
  });
});

describe('layer 2: commands', () => {
  it('parses names case-insensitively, with @botname, and ignores unknown slash words', () => {
    expect(parseCommand('/PING')).toEqual({ name: 'ping', args: [] });
    expect(parseCommand('/new@my_bot #sales', 'my_bot')).toEqual({ name: 'new', args: ['#sales'] });
    // While gated does not know its own name, it cannot tell a suffix is its own: text, not a command.
    expect(parseCommand('/new@my_bot #sales')).toBeUndefined();
    expect(parseCommand('/weather tomorrow')).toBeUndefined();
    expect(parseCommand('please /ping')).toBeUndefined();
    expect(parseCommand('/ping@')).toBeUndefined();
  });

  it('/ping answers pong first, then group, session and queue facts', async () => {
    const { db, send, gateway } = setup();
    db.prepare(
      `INSERT INTO sessions (group_folder, topic, session_id) VALUES ('default/firehose', '', 'sess-1')`,
    ).run();
    const id = await send('/ping');
    expect(row(db, id).state).toBe('command');
    const a = answers(db, TG).at(-1)!.split('\n');
    expect(a[0]).toBe('pong');
    expect(a).toContain('group: default/firehose');
    expect(a).toContain('session: sess-1');
    expect(a.some((l) => l.startsWith('queue: idle, 0 waiting'))).toBe(true);
    gateway.stop();
  });

  it('/new drops the session of the default topic; /new #topic only that topic', async () => {
    const { db, send, queue, gateway } = setup();
    const ins = db.prepare(
      `INSERT INTO sessions (group_folder, topic, session_id) VALUES ('default/firehose', ?, ?)`,
    );
    ins.run('', 's0');
    ins.run('sales', 's1');
    await send('/new #sales');
    const left = () => db.prepare('SELECT topic FROM sessions ORDER BY topic').pluck().all();
    expect(left()).toEqual(['']);
    // The name the Telegram channel stored (it may run in another process) makes the suffix this bot's.
    db.prepare(`INSERT INTO router_state (key, value) VALUES ('telegram.username', 'my_bot')`).run();
    await send('/NEW@my_bot');
    expect(left()).toEqual([]);
    expect(queue.resets).toEqual([
      { group: 'default/firehose', topic: 'sales' },
      { group: 'default/firehose', topic: '' },
    ]);
    expect(db.prepare('SELECT count(*) FROM system_messages').pluck().get()).toBe(2);
    gateway.stop();
  });

  it('/chatid, /help, /stop, and /status for admins only', async () => {
    const { db, send, queue, gateway } = setup({ admins: ['boss'] });
    await send('/chatid');
    expect(answers(db, TG).at(-1)).toBe(TG);
    await send('/help');
    expect(answers(db, TG).at(-1)).toMatch(/\/new[\s\S]*\/ping[\s\S]*\/stop[\s\S]*\/status/);
    queue.running.add('default/firehose#');
    await send('/stop');
    expect(queue.stops).toEqual([{ key: { group: 'default/firehose', topic: '' }, chatJid: TG }]);
    expect(answers(db, TG).at(-1)).toBe('stopped default/firehose');
    await send('/stop');
    expect(answers(db, TG).at(-1)).toBe('nothing is running');
    await send('/status', TG, { sender: 'someone' });
    expect(answers(db, TG).at(-1)).toMatch(/for admins/);
    await send('/status', TG, { sender: 'boss' });
    expect(answers(db, TG).at(-1)).toMatch(/^groups: 7\nactive runs: 0/);
    gateway.stop();
  });

  it('handles every command of a batch, not only the last, and none reaches an agent', async () => {
    const { db, gateway } = setup();
    const ids = ['/ping', 'hello', '/chatid', '/help', 'bye'].map((content) =>
      insertInbound(db, { chat_jid: TG, sender: 'u', content })!,
    );
    await vi.advanceTimersByTimeAsync(2000);
    expect(ids.map((id) => row(db, id).state)).toEqual(['command', 'ready', 'command', 'command', 'ready']);
    expect(answers(db, TG)).toHaveLength(3);
    gateway.stop();
  });

  it('passes unknown slash words on as text', async () => {
    const { db, send, gateway } = setup();
    const id = await send('/weather tomorrow');
    expect(row(db, id)).toMatchObject({ state: 'ready', content: '/weather tomorrow' });
    gateway.stop();
  });
});

describe('layer 3: prefix', () => {
  it('@name text sends one message to that group with the prefix stripped', async () => {
    const { db, send, gateway } = setup();
    const id = await send('@krons/content draft a post');
    // The agent gets the stripped text; the row keeps what the user wrote.
    expect(row(db, id)).toMatchObject({
      group_folder: 'krons/content',
      content: '@krons/content draft a post',
    });
    expect(db.prepare('SELECT agent_content FROM messages WHERE id = ?').pluck().get(id)).toBe(
      'draft a post',
    );
    const next = await send('and this?');
    expect(row(db, next).group_folder).toBe('default/firehose');
    gateway.stop();
  });

  it('#topic text goes to that topic of the chat group, stripped', async () => {
    const { db, send, gateway } = setup();
    const id = await send('#billing where is my invoice');
    expect(row(db, id)).toMatchObject({
      group_folder: 'default/firehose',
      session_topic: 'billing',
      content: '#billing where is my invoice',
    });
    expect(db.prepare('SELECT agent_content FROM messages WHERE id = ?').pluck().get(id)).toBe(
      'where is my invoice',
    );
    gateway.stop();
  });

  it('an unknown @name is not a prefix: the message goes on unchanged', async () => {
    const { db, send, gateway } = setup();
    const id = await send('@my_bot hello there');
    expect(row(db, id)).toMatchObject({ group_folder: 'default/firehose', content: '@my_bot hello there' });
    gateway.stop();
  });

  it('@ and # inside the text are never prefixes', async () => {
    const { db, send, gateway } = setup();
    const a = await send('mail bob@example.com please');
    const b = await send('we are #1');
    const c = await send('ping @krons/content later');
    expect(row(db, a)).toMatchObject({ content: 'mail bob@example.com please', session_topic: '' });
    expect(row(db, b)).toMatchObject({ content: 'we are #1', session_topic: '' });
    expect(row(db, c)).toMatchObject({
      content: 'ping @krons/content later',
      group_folder: 'default/firehose',
    });
    gateway.stop();
  });
});

describe('layer 4: routing', () => {
  it('routes through the example table', async () => {
    const { db, send, gateway } = setup();
    const cases: Array<[string, string, string]> = [
      ['telegram:-5075870332', 'mention', 'krons/content'],
      ['telegram:-1', 'mention', 'rhias/mentions'],
      ['bluesky:did:plc:x', 'follow', 'krons/notifs'],
      ['bluesky:did:plc:x', 'mention', 'bsky/feed'],
      ['discord:1', 'message', 'default/firehose'],
    ];
    for (const [chat, verb, group] of cases) {
      const id = await send('hi', chat, { verb });
      expect(row(db, id).group_folder, `${chat} ${verb}`).toBe(group);
    }
    const hits = db.prepare('SELECT route_id, hits FROM route_hits ORDER BY route_id').all();
    expect(hits).toEqual([1, 2, 3, 4, 5].map((route_id) => ({ route_id, hits: 1 })));
    gateway.stop();
  });

  it('stores but never dispatches an unrouted message, and answers builtin:ping / drops builtin:drop', async () => {
    const { db, send, gateway } = setup();
    db.prepare('DELETE FROM routes').run();
    db.prepare(
      `INSERT INTO routes (seq, match, target) VALUES (1, 'verb=typing', 'builtin:drop'), (2, 'room=pinger', 'builtin:ping')`,
    ).run();
    const u = await send('nobody routes me', 'discord:1');
    const d = await send('', 'discord:1', { verb: 'typing' });
    const p = await send('anything', 'discord:pinger');
    expect(row(db, u).state).toBe('unrouted');
    expect(row(db, d).state).toBe('dropped');
    expect(row(db, p).state).toBe('done');
    expect(answers(db, 'discord:pinger')).toEqual(['pong']);
    gateway.stop();
  });

  it('sees a route edited with SQL on the next poll', async () => {
    const { db, send, gateway } = setup();
    db.prepare(
      `INSERT INTO routes (seq, match, target) VALUES (-1, 'platform=discord', 'krons/notifs')`,
    ).run();
    const id = await send('x', 'discord:1');
    expect(row(db, id).group_folder).toBe('krons/notifs');
    gateway.stop();
  });

  it('web: and local: chats go straight to their folder, web topics to their own sessions', async () => {
    const { db, send, gateway } = setup({ groups: ['demo'] });
    const a = await send('hi', 'web:demo', { topic: 'alpha' });
    const b = await send('hi', 'web:demo', { topic: 'beta' });
    const c = await send('hi', 'local:demo');
    expect([row(db, a), row(db, b), row(db, c)].map((r) => [r.group_folder, r.session_topic])).toEqual([
      ['demo', 'alpha'],
      ['demo', 'beta'],
      ['demo', ''],
    ]);
    gateway.stop();
  });

  it('keeps a message for an unregistered group as unrouted with the reason', async () => {
    const { db, send, gateway } = setup({ groups: [] });
    const id = await send('hi', 'discord:1');
    expect(row(db, id)).toMatchObject({
      state: 'unrouted',
      error: "group 'default/firehose' is not registered",
    });
    gateway.stop();
  });
});
