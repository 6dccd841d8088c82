import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createMetrics } from '../../core/metrics.js';
import { ActionApplier, type ActionContext } from '../../queue/actions/apply.js';
import { parseActions } from '../../queue/actions/parse.js';
import type { Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { freshDb, tempDir } from '../helpers/db.js';

const GROUPS = ['krons', 'krons/content', 'krons/content/deep', 'other'];

function setup(maxDepth = 4, maxHops = 20) {
  const { db } = freshDb();
  const dir = tempDir();
  for (const g of GROUPS) addGroup(db, dir, g);
  const route = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
  route.run(0, 'room=-100', 'krons/content');
  route.run(1, 'room=-200', 'other');
  route.run(2, 'platform=discord sender=alice', 'krons');
  route.run(3, 'platform=discord', 'other');
  const metrics = createMetrics();
  const applier = new ActionApplier({ db, log: silentLogger(), tz: 'UTC', maxDepth, maxHops, metrics });
  return { db, applier, metrics };
}

function ctx(over: Partial<ActionContext> = {}): ActionContext {
  return {
    runId: 1,
    group: 'krons',
    topic: '',
    chatJid: 'telegram:-300',
    answering: { id: 7, chat_jid: 'telegram:-300', platform_msg_id: '55', topic: '' },
    now: Date.parse('2026-11-23T10:00:00Z'),
    ...over,
  };
}

const notes = (db: Db) =>
  db.prepare('SELECT group_folder, topic, content FROM system_messages ORDER BY id').all() as Array<{
    group_folder: string;
    topic: string;
    content: string;
  }>;
const logged = (db: Db) =>
  db.prepare('SELECT type, status, reason, message_id, task_id FROM actions ORDER BY id').all() as Array<{
    type: string;
    status: string;
    reason: string | null;
    message_id: number | null;
    task_id: number | null;
  }>;
const outbound = (db: Db) =>
  db.prepare('SELECT chat_jid, content, kind, reply_to FROM messages WHERE is_from_me = 1 ORDER BY id').all();

describe('action parsing', () => {
  it('names what is malformed', () => {
    const reasons = parseActions([
      'x',
      { text: 'no type' },
      { type: 'launch' },
      { type: 'send', text: 'hi' },
      { type: 'send', chat_jid: 'telegram:1', text: '' },
      { type: 'schedule', every: '1h', cron: '* * * * *', text: 'x' },
      { type: 'react', emoji: '' },
    ]).map((p) => (p.ok ? 'ok' : `${p.type}: ${p.reason}`));
    expect(reasons).toEqual([
      '?: an action must be a JSON object',
      '?: an action needs a string "type"',
      "launch: unknown action type 'launch' (known: send, delegate, escalate, schedule, react, remember, forget)",
      'send: "chat_jid" must be a chat JID such as telegram:-100123',
      'send: "text" must be a non-empty string',
      'schedule: a schedule needs exactly one of "cron", "every", "at"',
      'react: "emoji" must be a short non-empty string',
    ]);
    expect(parseActions({ type: 'send' })).toEqual([
      { ok: false, type: '?', reason: '"actions" must be an array' },
    ]);
    expect(parseActions(undefined)).toEqual([]);
    expect(
      parseActions(Array.from({ length: 21 }, () => ({ type: 'react', emoji: '👍' })))[20],
    ).toMatchObject({
      ok: false,
      reason: 'more than 20 actions in one block',
    });
  });
});

describe('actions applied in the block transaction', () => {
  it('send: to the run chat, to chats that reach the group or below, to send_allow globs; else refused with one note', () => {
    const { db, applier, metrics } = setup();
    db.prepare(
      `INSERT INTO chat_state (chat_jid, sticky_group) VALUES ('telegram:-400', 'krons/content/deep')`,
    ).run();
    const ok = [
      'telegram:-300', // the chat the run answers
      'telegram:-100', // routed to krons/content
      'web:krons/content', // a web chat of a group below
      'telegram:-400', // sticky to a group below
      'discord:9', // discord reaches krons when alice writes
    ];
    const out = applier.apply(
      ctx(),
      ok.map((chat_jid) => ({ type: 'send', chat_jid, text: `to ${chat_jid}` })),
    );
    expect(out).toMatchObject({ applied: 5, refused: 0, placed: 0 });
    expect(out.outbound).toHaveLength(5);
    expect(outbound(db)).toEqual(
      ok.map((c) => ({ chat_jid: c, content: `to ${c}`, kind: 'send', reply_to: null })),
    );

    const refused = applier.apply(ctx(), [
      { type: 'send', chat_jid: 'telegram:-200', text: 'no' }, // routed to another group
      { type: 'send', chat_jid: 'web:other', text: 'no' },
      { type: 'send', chat_jid: 'delegation:1', text: 'no' },
    ]);
    expect(refused).toMatchObject({ applied: 0, refused: 3 });
    expect(notes(db)).toHaveLength(3);
    expect(notes(db)[0]).toEqual({
      group_folder: 'krons',
      topic: '',
      content:
        "Your send action was not applied: chat 'telegram:-200' does not reach 'krons' (add it to registered_groups.send_allow to allow it).",
    });
    expect(outbound(db)).toHaveLength(5);

    db.prepare(
      `UPDATE registered_groups SET send_allow = 'telegram:-2* web:oth?r' WHERE folder = 'krons'`,
    ).run();
    expect(
      applier.apply(ctx(), [
        { type: 'send', chat_jid: 'telegram:-200', text: 'now yes' },
        { type: 'send', chat_jid: 'web:other', text: 'now yes' },
      ]),
    ).toMatchObject({ applied: 2, refused: 0 });
    expect(logged(db).map((a) => a.status)).toEqual([
      ...Array(5).fill('applied'),
      'refused',
      'refused',
      'refused',
      'applied',
      'applied',
    ]);
    return metrics.text().then((text) => {
      expect(text).toMatch(/gated_actions_total\{type="send",outcome="applied"\} 7/);
      expect(text).toMatch(/gated_actions_total\{type="send",outcome="refused"\} 3/);
    });
  });

  it('delegate: to a group below (child name first, then absolute), placed as a ready row in its own chat', () => {
    const { db, applier } = setup();
    const out = applier.apply(ctx({ topic: 'ops' }), [
      { type: 'delegate', group: 'content', text: 'draft a post' },
      { type: 'delegate', group: 'krons/content/deep', text: 'dig' },
      { type: 'delegate', group: 'other', text: 'no' },
      { type: 'delegate', group: 'krons', text: 'not myself' },
      { type: 'delegate', group: 'nobody', text: 'no' },
    ]);
    expect(out).toMatchObject({ applied: 2, refused: 3, placed: 2 });
    const rows = db
      .prepare(
        `SELECT chat_jid, sender, content, verb, state, group_folder, session_topic FROM messages WHERE is_from_me = 0 ORDER BY id`,
      )
      .all();
    expect(rows).toEqual([
      {
        chat_jid: 'delegation:1',
        sender: 'group:krons',
        content: 'draft a post',
        verb: 'delegate',
        state: 'ready',
        group_folder: 'krons/content',
        session_topic: '',
      },
      {
        chat_jid: 'delegation:2',
        sender: 'group:krons',
        content: 'dig',
        verb: 'delegate',
        state: 'ready',
        group_folder: 'krons/content/deep',
        session_topic: '',
      },
    ]);
    expect(notes(db).map((n) => n.content)).toEqual([
      "Your delegate action was not applied: group 'other' is not below 'krons': delegate only goes down (escalate goes up).",
      "Your delegate action was not applied: group 'krons' is not below 'krons': delegate only goes down (escalate goes up).",
      "Your delegate action was not applied: no group 'nobody' below 'krons'.",
    ]);
    expect(notes(db)[0]).toMatchObject({ group_folder: 'krons', topic: 'ops' });
    // The child's answer goes back to the delegating session and chat as verb 'delegation'.
    const back = applier.answerDelegation(
      { group: 'krons/content', topic: '', chatJid: 'delegation:1', now: Date.now() },
      'here is the draft',
    );
    expect(
      db
        .prepare(
          `SELECT chat_jid, sender, content, verb, state, group_folder, session_topic FROM messages WHERE id = ?`,
        )
        .get(back),
    ).toEqual({
      chat_jid: 'telegram:-300',
      sender: 'group:krons/content',
      content: 'here is the draft',
      verb: 'delegation',
      state: 'ready',
      group_folder: 'krons',
      session_topic: 'ops',
    });
    expect(
      applier.answerDelegation({ group: 'krons', topic: '', chatJid: 'telegram:-300', now: 0 }, 'x'),
    ).toBeNull();
    // An answer of only whitespace goes nowhere.
    expect(
      applier.answerDelegation(
        { group: 'krons/content', topic: '', chatJid: 'delegation:1', now: 0 },
        ' \n\t',
      ),
    ).toBeNull();
  });

  it('escalate: to the nearest registered ancestor; none above a root group', () => {
    const { db, applier } = setup();
    db.prepare(`DELETE FROM registered_groups WHERE folder = 'krons/content'`).run();
    expect(
      applier.apply(ctx({ group: 'krons/content/deep' }), [{ type: 'escalate', text: 'help' }]),
    ).toMatchObject({ applied: 1 });
    expect(
      db.prepare(`SELECT group_folder, verb FROM messages WHERE chat_jid = 'delegation:1'`).get(),
    ).toEqual({ group_folder: 'krons', verb: 'escalate' });
    // A root group has no capability to escalate: refused as not allowed.
    expect(applier.capabilities('krons')).not.toContain('escalate');
    applier.apply(ctx({ group: 'krons' }), [{ type: 'escalate', text: 'help' }]);
    expect(notes(db).at(-1)!.content).toBe(
      "Your escalate action was not applied: 'escalate' is not allowed for group 'krons'.",
    );
  });

  it('a delegation chain deeper than the limit is refused', () => {
    const { db, applier } = setup(2);
    applier.apply(ctx(), [{ type: 'delegate', group: 'content', text: 'hop 1' }]);
    applier.apply(ctx({ group: 'krons/content', chatJid: 'delegation:1' }), [
      { type: 'delegate', group: 'deep', text: 'hop 2' },
    ]);
    expect(db.prepare(`SELECT depth FROM delegations ORDER BY id`).pluck().all()).toEqual([1, 2]);
    const out = applier.apply(ctx({ group: 'krons/content/deep', chatJid: 'delegation:2' }), [
      { type: 'escalate', text: 'hop 3' },
    ]);
    expect(out).toMatchObject({ applied: 0, refused: 1 });
    expect(notes(db).at(-1)).toEqual({
      group_folder: 'krons/content/deep',
      topic: '',
      content: 'Your escalate action was not applied: the delegation chain would be 3 deep; at most 2.',
    });
  });

  it('a chain is bounded per originating message: its hops count delegations and answers, its depth never resets', () => {
    const { db, applier } = setup(3, 4);
    const t = ctx().now;
    const answering = (id: number) => ({ id, chat_jid: 'telegram:-300', platform_msg_id: null, topic: '' });
    const answer = (delegation: number, text: string) =>
      applier.answerDelegation(
        { group: 'krons/content', topic: '', chatJid: `delegation:${delegation}`, now: t },
        text,
      )!;
    const state = (id: number) => db.prepare(`SELECT state, error FROM messages WHERE id = ?`).get(id);
    applier.apply(ctx(), [{ type: 'delegate', group: 'content', text: 'ping' }]); // hop 1
    const pong = answer(1, 'pong'); // hop 2
    // Delegating again from the answer's turn continues the chain of message 7 at the same depth (hop 3).
    applier.apply(ctx({ answering: answering(pong) }), [
      { type: 'delegate', group: 'content', text: 'ping' },
    ]);
    const pong2 = answer(2, 'pong'); // hop 4
    expect(state(pong2)).toEqual({ state: 'ready', error: null });
    expect(db.prepare(`SELECT depth, origin FROM delegations ORDER BY id`).all()).toEqual([
      { depth: 1, origin: 7 },
      { depth: 1, origin: 7 },
    ]);
    const reason = 'the delegation chain of message 7 would make 5 hops; at most 4';
    // A stranger's message batched in the same turn after the answer does not start the chain afresh.
    const out = applier.apply(ctx({ answering: answering(99), turnRows: [pong2, 99] }), [
      { type: 'delegate', group: 'content', text: 'ping' },
    ]);
    expect(out).toMatchObject({ applied: 0, refused: 1 });
    expect(notes(db).at(-1)).toEqual({
      group_folder: 'krons',
      topic: '',
      content: `Your delegate action was not applied: ${reason}.`,
    });
    // An answer past the bound is kept, limited with the reason, and the answering session is told.
    const late = answer(2, 'one more');
    expect(state(late)).toEqual({ state: 'limited', error: reason });
    expect(notes(db).at(-1)).toEqual({
      group_folder: 'krons/content',
      topic: '',
      content: `Your answer to delegation 2 was kept but not passed on to krons: ${reason}.`,
    });
    // Another message starts a chain of its own.
    applier.apply(ctx({ answering: answering(8) }), [{ type: 'delegate', group: 'content', text: 'new' }]);
    expect(db.prepare(`SELECT depth, origin FROM delegations WHERE id = 3`).get()).toEqual({
      depth: 1,
      origin: 8,
    });
  });

  it("every run of a chain counts against its group's daily limits: a delegation or answer past one waits", () => {
    const { db, applier } = setup();
    const t = ctx().now;
    const run = db.prepare(
      `INSERT INTO session_log (group_folder, started_at) VALUES (?, '2026-11-23T09:00:00.000Z')`,
    );
    db.prepare(`INSERT INTO limits (group_folder, runs_per_day) VALUES ('krons/content', 1)`).run();
    applier.apply(ctx(), [{ type: 'delegate', group: 'content', text: 'first' }]);
    run.run('krons/content');
    const out = applier.apply(ctx(), [{ type: 'delegate', group: 'content', text: 'second' }]);
    expect(out).toMatchObject({ applied: 0, refused: 1 });
    expect(notes(db).at(-1)!.content).toBe(
      "Your delegate action was not applied: 'krons/content' reached its limit of 1 agent runs per day.",
    );
    // The delegating group at its cost limit: the answer is kept limited for an operator's release.
    db.prepare(`INSERT INTO limits (group_folder, cost_per_day_usd) VALUES ('krons', 0.5)`).run();
    db.prepare(
      `INSERT INTO session_log (group_folder, started_at, cost_usd) VALUES ('krons', '2026-11-23T09:30:00.000Z', 0.75)`,
    ).run();
    const back = applier.answerDelegation(
      { group: 'krons/content', topic: '', chatJid: 'delegation:1', now: t },
      'the answer',
    )!;
    expect(db.prepare(`SELECT state, error FROM messages WHERE id = ?`).get(back)).toEqual({
      state: 'limited',
      error: "'krons' reached its limit of $0.5 of agent cost per day",
    });
  });

  it('schedule: a task of this group answered in this chat; a bad schedule is refused', () => {
    const { db, applier } = setup();
    const out = applier.apply(ctx({ topic: 'ops' }), [
      { type: 'schedule', every: '1h30m', text: 'check in' },
      { type: 'schedule', cron: '0 9 * * *', topic: '#morning', text: 'good morning' },
      { type: 'schedule', cron: 'whenever', text: 'no' },
    ]);
    expect(out).toMatchObject({ applied: 2, refused: 1 });
    expect(
      db.prepare(`SELECT group_folder, topic, chat_jid, kind, spec, created_by FROM tasks ORDER BY id`).all(),
    ).toEqual([
      {
        group_folder: 'krons',
        topic: 'ops',
        chat_jid: 'telegram:-300',
        kind: 'every',
        spec: '1h30m',
        created_by: 'agent:krons',
      },
      {
        group_folder: 'krons',
        topic: 'morning',
        chat_jid: 'telegram:-300',
        kind: 'cron',
        spec: '0 9 * * *',
        created_by: 'agent:krons',
      },
    ]);
    expect(logged(db).map((a) => a.task_id)).toEqual([1, 2, null]);
    expect(notes(db)[0]!.content).toMatch(
      /^Your schedule action was not applied: bad cron pattern 'whenever'/,
    );
  });

  it('schedule is bounded (§17): no task firing more often than the minimum, at most N active per group', () => {
    const { db } = setup();
    const applier = new ActionApplier({
      db,
      log: silentLogger(),
      tz: 'UTC',
      maxDepth: 4,
      taskBounds: { minIntervalMs: 60_000, maxActive: 3 },
    });
    const out = applier.apply(ctx(), [
      { type: 'schedule', every: '1ms', text: 'flood' },
      { type: 'schedule', every: '59s', text: 'almost' },
      { type: 'schedule', cron: '0,1 * * * *', text: 'a minute apart is allowed' },
      { type: 'schedule', every: '1m', text: 'the minimum is allowed' },
      { type: 'schedule', at: '2027-01-01T00:00Z', text: 'once is allowed' },
      { type: 'schedule', every: '1h', text: 'one too many' },
    ]);
    expect(out).toMatchObject({ applied: 3, refused: 3 });
    expect(db.prepare('SELECT spec FROM tasks ORDER BY id').pluck().all()).toEqual([
      '0,1 * * * *',
      '1m',
      '2027-01-01T00:00:00.000Z',
    ]);
    expect(notes(db).map((n) => n.content)).toEqual([
      "Your schedule action was not applied: a task may fire at most every 1m; '1ms' fires 1ms apart.",
      "Your schedule action was not applied: a task may fire at most every 1m; '59s' fires 59s apart.",
      "Your schedule action was not applied: group 'krons' already has 3 active tasks (at most 3).",
    ]);
    // A tighter minimum also catches a cron pattern whose due times bunch up.
    const strict = new ActionApplier({
      db,
      log: silentLogger(),
      tz: 'UTC',
      maxDepth: 4,
      taskBounds: { minIntervalMs: 3_600_000, maxActive: 50 },
    });
    expect(strict.apply(ctx(), [{ type: 'schedule', cron: '0,1 * * * *', text: 'x' }])).toMatchObject({
      refused: 1,
    });
    expect(notes(db).at(-1)!.content).toMatch(/'0,1 \* \* \* \*' fires 1m apart/);
  });

  it('schedule uses the contract defaults when no bounds are configured', () => {
    const { db, applier } = setup();
    expect(applier.apply(ctx(), [{ type: 'schedule', every: '1ms', text: 'x' }])).toMatchObject({
      refused: 1,
    });
    expect(db.prepare('SELECT count(*) FROM tasks').pluck().get()).toBe(0);
  });

  it('react: an outbound reaction row on the answered message where the platform has reactions', () => {
    const { db, applier } = setup();
    expect(applier.apply(ctx(), [{ type: 'react', emoji: '👍' }])).toMatchObject({
      applied: 1,
      outbound: [expect.any(Number)],
    });
    expect(outbound(db)).toEqual([
      { chat_jid: 'telegram:-300', content: '👍', kind: 'reaction', reply_to: '55' },
    ]);
    const web = { id: 8, chat_jid: 'web:krons', platform_msg_id: null, topic: '' };
    applier.apply(ctx({ chatJid: 'web:krons', answering: web }), [{ type: 'react', emoji: '👍' }]);
    expect(notes(db).at(-1)!.content).toBe('Your react action was not applied: web chats have no reactions.');
  });

  it('capabilities follow registered_groups as another connection edits it, with no stale answer', () => {
    const { db, path } = freshDb();
    const dir = tempDir();
    for (const g of ['a', 'ab', 'a0', 'a-x', 'a_x']) addGroup(db, dir, g);
    const applier = new ActionApplier({ db, log: silentLogger(), tz: 'UTC', maxDepth: 4 });
    // Siblings named 'a…' ('a-x' sorts before '/', 'a0', 'ab' and 'a_x' after it) are not below 'a'.
    expect(applier.capabilities('a')).toEqual(['send', 'schedule', 'react', 'remember', 'forget']);
    // The operator's sqlite3: another connection, writing while this one keeps its statements.
    const operator = new Database(path);
    operator.prepare(`INSERT INTO registered_groups (folder) VALUES ('a/b/c')`).run();
    expect(applier.capabilities('a')).toEqual([
      'send',
      'delegate',
      'schedule',
      'react',
      'remember',
      'forget',
    ]);
    expect(applier.capabilities('a/b/c')).toEqual([
      'send',
      'escalate',
      'schedule',
      'react',
      'remember',
      'forget',
    ]);
    expect(applier.capabilities('a/b')).toEqual([]);
    operator.prepare(`DELETE FROM registered_groups WHERE folder = 'a'`).run();
    expect(applier.capabilities('a/b/c')).toEqual(['send', 'schedule', 'react', 'remember', 'forget']);
    operator.prepare(`UPDATE registered_groups SET folder = 'ab/c' WHERE folder = 'a/b/c'`).run();
    expect(applier.capabilities('ab')).toEqual([
      'send',
      'delegate',
      'schedule',
      'react',
      'remember',
      'forget',
    ]);
    expect(applier.capabilities('ab/c')).toEqual([
      'send',
      'escalate',
      'schedule',
      'react',
      'remember',
      'forget',
    ]);
    operator.close();
  });

  it('capabilities: the group setting narrows them; delegate needs a group below', () => {
    const { db, applier } = setup();
    expect(applier.capabilities('krons')).toEqual([
      'send',
      'delegate',
      'schedule',
      'react',
      'remember',
      'forget',
    ]);
    expect(applier.capabilities('krons/content')).toEqual([
      'send',
      'delegate',
      'escalate',
      'schedule',
      'react',
      'remember',
      'forget',
    ]);
    expect(applier.capabilities('other')).toEqual(['send', 'schedule', 'react', 'remember', 'forget']);
    db.prepare(`UPDATE registered_groups SET actions = 'send, react' WHERE folder = 'krons'`).run();
    expect(applier.capabilities('krons')).toEqual(['send', 'react']);
    applier.apply(ctx(), [{ type: 'schedule', every: '1h', text: 'x' }]);
    expect(notes(db).at(-1)!.content).toBe(
      "Your schedule action was not applied: 'schedule' is not allowed for group 'krons'.",
    );
    expect(db.prepare('SELECT count(*) FROM tasks').pluck().get()).toBe(0);
  });
});
