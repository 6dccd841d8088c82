import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { insertInbound } from '../../store/messages.js';
import { CODE_ALPHABET, releaseLimited } from '../../store/approvals.js';
import { AccessSource, setLimits, upsertMember } from '../../store/access.js';
import { DailyUsage, setSenderLimits } from '../../store/limits.js';
import { AccessGate } from '../../gateway/access.js';
import { freshDb } from '../helpers/db.js';
import { answers, row, testGateway } from '../helpers/gateway.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-11-23T10:00:00.000Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const CHAT = 'telegram:-100';
const OWNER_CHAT = 'telegram:555';
const HOUR = 3_600_000;

/** A gateway whose telegram chats all route to `club` (and its child `club/kids`); one tick per send. */
function setup(opts: { access?: string; admins?: string[] } = {}) {
  const { db } = freshDb();
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'room=-200', 'club/kids')`).run();
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, 'platform=telegram', 'club')`).run();
  const t = testGateway(db, { groups: ['club', 'club/kids'], admins: opts.admins ?? [] });
  if (opts.access) db.prepare(`UPDATE registered_groups SET access = ?`).run(opts.access);
  t.gateway.start();
  const send = async (content: string, sender: string, chat = CHAT) => {
    const id = insertInbound(db, { chat_jid: chat, sender, content, timestamp: new Date().toISOString() })!;
    await vi.advanceTimersByTimeAsync(2000);
    return id;
  };
  const state = (id: number) => row(db, id).state;
  const codeOf = (text: string | undefined) => /code is ([A-Z0-9]{8})/.exec(text ?? '')?.[1];
  return { db, ...t, send, state, codeOf };
}

describe('access: open groups', () => {
  it('an open group serves every sender as before: held, then ready, no answer from the gateway', async () => {
    const { db, send, state, gateway } = setup();
    const a = await send('hello', 'stranger');
    expect(state(a)).toBe('ready');
    expect(row(db, a)).toMatchObject({ group_folder: 'club', error: null });
    expect(answers(db, CHAT)).toEqual([]);
    gateway.stop();
  });

  it('a blocked sender is denied even in an open group', async () => {
    const { db, send, state, gateway } = setup();
    upsertMember(db, 'club', 'telegram:troll', 'blocked');
    expect(state(await send('spam', 'troll'))).toBe('denied');
    expect(state(await send('hi', 'friend'))).toBe('ready');
    gateway.stop();
  });
});

describe('access: members groups', () => {
  it("a stranger's message is denied and never dispatched; a member's is served", async () => {
    const { db, send, state, queue, gateway } = setup({ access: 'members' });
    upsertMember(db, 'club', 'telegram:alice', 'member');
    const wakes = queue.wakes;
    const s = await send('let me in', 'mallory');
    expect(state(s)).toBe('denied');
    expect(row(db, s).error).toMatch(/telegram:mallory is not a member of club/);
    expect(queue.wakes).toBe(wakes);
    const m = await send('hi agent', 'alice');
    expect(state(m)).toBe('ready');
    expect(queue.wakes).toBe(wakes + 1);
    // Nothing a stranger wrote can become ready later without an operator.
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(state(s)).toBe('denied');
    gateway.stop();
  });

  it('a stranger cannot /new or /stop the group, nor read its /ping facts; a member can', async () => {
    const { db, send, queue, gateway } = setup({ access: 'members' });
    upsertMember(db, 'club', 'telegram:alice', 'member');
    await send('/new', 'mallory');
    expect(answers(db, CHAT).at(-1)).toBe('/new refused: telegram:mallory is not a member of club');
    await send('/stop', 'mallory');
    expect(answers(db, CHAT).at(-1)).toBe('/stop refused: telegram:mallory is not a member of club');
    await send('/ping', 'mallory');
    expect(answers(db, CHAT).at(-1)).toMatch(/^pong\n\(group facts are for members/);
    expect(queue.resets).toEqual([]);
    expect(queue.stops).toEqual([]);
    await send('/new', 'alice');
    expect(answers(db, CHAT).at(-1)).toBe('new session for club');
    expect(queue.resets).toHaveLength(1);
    gateway.stop();
  });

  it('blocked beats member (and owner); GATED_ADMINS cannot be blocked', async () => {
    const { db, send, state, gateway } = setup({ access: 'members', admins: ['telegram:boss'] });
    upsertMember(db, 'club', 'telegram:*', 'member');
    upsertMember(db, 'club', 'telegram:bob', 'blocked');
    upsertMember(db, 'club', 'telegram:boss', 'blocked');
    expect(state(await send('hi', 'carol'))).toBe('ready');
    expect(state(await send('hi', 'bob'))).toBe('denied');
    expect(row(db, await send('hi', 'bob')).error).toMatch(/blocked/);
    expect(state(await send('hi', 'boss'))).toBe('ready');
    gateway.stop();
  });

  it('a child group inherits its parent members until it has rows of its own', async () => {
    const { db, send, state, gateway } = setup({ access: 'members' });
    upsertMember(db, 'club', 'telegram:alice', 'member');
    expect(state(await send('hi', 'alice', 'telegram:-200'))).toBe('ready');
    // Rows of its own replace the parent's: alice is a stranger in club/kids now.
    upsertMember(db, 'club/kids', 'telegram:kid', 'member');
    expect(state(await send('hi', 'alice', 'telegram:-200'))).toBe('denied');
    expect(state(await send('hi', 'kid', 'telegram:-200'))).toBe('ready');
    gateway.stop();
  });

  it('a sqlite3-style edit of members applies on the next message', async () => {
    const { db, send, state, gateway } = setup({ access: 'members' });
    expect(state(await send('hi', 'dave'))).toBe('denied');
    db.prepare(
      `INSERT INTO members (group_folder, sender, role) VALUES ('club', 'telegram:dave', 'member')`,
    ).run();
    expect(state(await send('hi again', 'dave'))).toBe('ready');
    gateway.stop();
  });
});

describe('access: approval groups', () => {
  it('a stranger gets one code; an owner approves; the pending messages are released in order', async () => {
    const { db, send, state, codeOf, gateway } = setup({ access: 'approval' });
    upsertMember(db, 'club', 'telegram:owner', 'owner');
    const first = await send('first', 'newbie');
    const second = await send('second', 'newbie');
    expect([state(first), state(second)]).toEqual(['pending', 'pending']);
    const replies = answers(db, CHAT);
    expect(replies).toHaveLength(1);
    const code = codeOf(replies[0])!;
    expect(code).toHaveLength(8);
    for (const c of code) expect(CODE_ALPHABET).toContain(c);

    // Typed in lowercase, in the owner's own (unrouted) private chat.
    const cmd = await send(`/approve ${code.toLowerCase()}`, 'owner', OWNER_CHAT);
    expect(state(cmd)).toBe('command');
    expect(answers(db, OWNER_CHAT).at(-1)).toMatch(
      /approved telegram:newbie as a member of club .*2 messages released/,
    );
    await vi.advanceTimersByTimeAsync(2000);
    expect([state(first), state(second)]).toEqual(['ready', 'ready']);
    const readyOrder = db
      .prepare(`SELECT id FROM messages WHERE state = 'ready' ORDER BY ready_at, id`)
      .pluck()
      .all();
    expect(readyOrder).toEqual([first, second]);
    expect(db.prepare(`SELECT role FROM members WHERE sender = 'telegram:newbie'`).pluck().get()).toBe(
      'member',
    );
    // Now a member: served at once.
    expect(state(await send('third', 'newbie'))).toBe('ready');
    expect(answers(db, CHAT).at(-1)).toMatch(/approved for club/);
    gateway.stop();
  });

  it('/approve by a non-owner is refused as for an unknown code and changes nothing', async () => {
    const { db, send, state, codeOf, gateway } = setup({ access: 'approval' });
    upsertMember(db, 'club', 'telegram:owner', 'owner');
    upsertMember(db, 'club', 'telegram:member', 'member');
    const m = await send('hello', 'newbie');
    const code = codeOf(answers(db, CHAT)[0])!;
    await send(`/approve ${code}`, 'member', OWNER_CHAT);
    // The same words as for a code that does not exist: no telling that it exists, nor for which group.
    // After it, how to become an owner, with the sender's own id: the same words for any code.
    const hint = ` (owners of club decide its questions; you are telegram:member: the operator makes you one with 'gated access add club telegram:member --role owner')`;
    expect(answers(db, OWNER_CHAT).at(-1)).toBe(
      `you may not approve ${code}: no such code is open to you${hint}`,
    );
    await send(`/approve ABCDEFGH`, 'member', OWNER_CHAT);
    expect(answers(db, OWNER_CHAT).at(-1)).toBe(
      `you may not approve ABCDEFGH: no such code is open to you${hint}`,
    );
    await send(`/approve ${code}`, 'newbie');
    expect(answers(db, CHAT).at(-1)).toMatch(
      new RegExp(
        `^you may not approve ${code}: no such code is open to you( \\(owners of club .*telegram:newbie --role owner'\\))?$`,
      ),
    );
    expect(state(m)).toBe('pending');
    expect(db.prepare(`SELECT state FROM approvals WHERE code = ?`).pluck().get(code)).toBe('open');
    expect(db.prepare(`SELECT count(*) FROM members WHERE role = 'member'`).pluck().get()).toBe(1);
    gateway.stop();
  });

  it('/reject denies the pending messages; an admin from GATED_ADMINS may decide too', async () => {
    const { db, send, state, codeOf, gateway } = setup({ access: 'approval', admins: ['root'] });
    const m = await send('hello', 'newbie');
    const code = codeOf(answers(db, CHAT)[0])!;
    await send(`/reject ${code}`, 'root', OWNER_CHAT);
    expect(answers(db, OWNER_CHAT).at(-1)).toMatch(/rejected telegram:newbie .*1 message denied/);
    expect(state(m)).toBe('denied');
    // Within the hour a rejected stranger is turned away without a new code.
    expect(state(await send('again?', 'newbie'))).toBe('denied');
    expect(answers(db, CHAT).filter((a) => /code is/.test(a))).toHaveLength(1);
    gateway.stop();
  });

  it('a code expires after an hour; one new code per stranger per hour; at most 3 open codes', async () => {
    const { db, send, state, codeOf, gateway } = setup({ access: 'approval' });
    upsertMember(db, 'club', 'telegram:owner', 'owner');
    await send('hi', 's1');
    const code1 = codeOf(answers(db, CHAT).at(-1))!;
    await send('hi', 's2');
    await send('hi', 's3');
    expect(answers(db, CHAT)).toHaveLength(3);
    // The fourth stranger is held without a code.
    const fourth = await send('hi', 's4');
    expect(state(fourth)).toBe('pending');
    expect(row(db, fourth).error).toMatch(/3 open codes/);
    expect(answers(db, CHAT)).toHaveLength(3);

    await vi.advanceTimersByTimeAsync(HOUR);
    await send(`/approve ${code1}`, 'owner', OWNER_CHAT);
    expect(answers(db, OWNER_CHAT).at(-1)).toBe(`not approved: code ${code1} expired`);
    // The codes expired, so s4 gets one now and its earlier message rides along when approved.
    const later = await send('still here', 's4');
    const code4 = codeOf(answers(db, CHAT).at(-1))!;
    expect(code4).toBeDefined();
    await send('and again', 's4');
    expect(answers(db, CHAT).filter((a) => /code is/.test(a))).toHaveLength(4);
    await send(`/approve ${code4}`, 'owner', OWNER_CHAT);
    await vi.advanceTimersByTimeAsync(2000);
    expect([state(fourth), state(later)]).toEqual(['ready', 'ready']);
    // s1's code was issued more than an hour ago: it may get a new one.
    expect(state(await send('hi', 's1'))).toBe('pending');
    expect(answers(db, CHAT).filter((a) => /code is/.test(a))).toHaveLength(5);
    gateway.stop();
  });

  it('a stranger who writes again within the hour of an expired-looking code gets no second code', async () => {
    const { db, send, codeOf, gateway } = setup({ access: 'approval' });
    await send('hi', 'eve');
    const code = codeOf(answers(db, CHAT)[0])!;
    db.prepare(`UPDATE approvals SET expires_at = 0 WHERE code = ?`).run(code);
    const m = await send('hello?', 'eve');
    expect(row(db, m)).toMatchObject({
      state: 'pending',
      error: expect.stringMatching(/one code per sender per hour/),
    });
    expect(answers(db, CHAT)).toHaveLength(1);
    gateway.stop();
  });
});

describe('access: limits', () => {
  it('messages per sender per hour: over the limit is limited, told once per window, and released', async () => {
    const { db, send, state, gateway } = setup();
    setLimits(db, 'club', { senderPerHour: 2, runsPerDay: null, costPerDayUsd: null });
    const a = await send('one', 'chatty');
    const b = await send('two', 'chatty');
    const c = await send('three', 'chatty');
    const d = await send('four', 'chatty');
    expect([a, b, c, d].map(state)).toEqual(['ready', 'ready', 'limited', 'limited']);
    expect(answers(db, CHAT)).toHaveLength(1);
    expect(answers(db, CHAT)[0]).toMatch(/Limit reached \(2 messages per sender per hour\)/);
    // Until when, as the chat reads it: a wall time in the configured zone, not an ISO instant.
    expect(answers(db, CHAT)[0]).toMatch(/messages until \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC are kept/);
    // Another sender has an allowance of their own.
    expect(state(await send('hi', 'quiet'))).toBe('ready');

    expect(releaseLimited(db, CHAT, Date.now())).toBe(2);
    await vi.advanceTimersByTimeAsync(2000);
    expect([c, d].map(state)).toEqual(['ready', 'ready']);

    // The next hour is a new window with a new allowance and a new notice.
    await vi.advanceTimersByTimeAsync(HOUR);
    const next = [await send('five', 'chatty'), await send('six', 'chatty'), await send('seven', 'chatty')];
    expect(next.map(state)).toEqual(['ready', 'ready', 'limited']);
    expect(answers(db, CHAT).filter((t) => t.startsWith('Limit reached'))).toHaveLength(2);
    gateway.stop();
  });

  it('messages per sender per hour count what was routed while the limit was set; only those are indexed', async () => {
    const { db, send, state, gateway } = setup();
    const before = await send('zero', 'chatty');
    setLimits(db, 'club', { senderPerHour: 2, runsPerDay: null, costPerDayUsd: null });
    const after = [await send('one', 'chatty'), await send('two', 'chatty'), await send('three', 'chatty')];
    expect([before, ...after].map(state)).toEqual(['ready', 'ready', 'ready', 'limited']);
    const counted = db
      .prepare(`SELECT id FROM messages INDEXED BY idx_messages_sender_counted WHERE counted = 1 ORDER BY id`)
      .pluck()
      .all();
    expect(counted).toEqual(after);
    gateway.stop();
  });

  it('runs per day and cost per day count the group’s session_log rows of the day', async () => {
    const { db, send, state, gateway } = setup();
    const now = new Date().toISOString();
    db.prepare(`INSERT INTO session_log (group_folder, started_at, cost_usd) VALUES ('club', ?, 0.75)`).run(
      now,
    );
    setLimits(db, 'club', { senderPerHour: null, runsPerDay: 2, costPerDayUsd: null });
    expect(state(await send('a', 'x'))).toBe('ready');
    db.prepare(`INSERT INTO session_log (group_folder, started_at, cost_usd) VALUES ('club', ?, 0.5)`).run(
      now,
    );
    expect(state(await send('b', 'x'))).toBe('limited');
    setLimits(db, 'club', { senderPerHour: null, runsPerDay: null, costPerDayUsd: 1 });
    const c = await send('c', 'y');
    expect(row(db, c)).toMatchObject({ state: 'limited', error: expect.stringMatching(/\$1 of agent cost/) });
    gateway.stop();
  });

  it('the groups with per-sender limits are read once per batch, and again in the next', () => {
    const { db } = freshDb();
    db.prepare(`INSERT INTO registered_groups (folder) VALUES ('club'), ('other')`).run();
    const gate = new AccessGate(db, new AccessSource(db, []));
    const asked = vi.spyOn(DailyUsage.prototype, 'senderLimitGroups');
    const one = vi.spyOn(DailyUsage.prototype, 'hasSenderLimits');
    const msg = { chat_jid: CHAT, sender: 'alice', verb: 'say', content: 'hi' } as never;
    const now = Date.now();
    gate.beginBatch();
    for (let i = 0; i < 5; i++) {
      expect(gate.quiet(msg, 'club')).toBe(true);
      expect(gate.decide(msg, 'club', now).state).toBe('serve');
    }
    gate.quiet(msg, 'other');
    gate.endBatch();
    expect(asked).toHaveBeenCalledTimes(1);
    setSenderLimits(db, 'club', 'telegram:alice', { runsPerDay: 1, costPerDayUsd: null, tokensPerDay: null });
    gate.beginBatch();
    expect(gate.quiet(msg, 'club')).toBe(false);
    gate.endBatch();
    expect(asked).toHaveBeenCalledTimes(2);
    expect(one).not.toHaveBeenCalled();
    asked.mockRestore();
    one.mockRestore();
  });
});
