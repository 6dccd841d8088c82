/**
 * Routing state under access rules (docs/SECURITY.md, docs/ACCESS.md "Routing state"): only a sender who may
 * reach the chat's group now and the target group may set or reset the chat's sticky group or topic; an
 * edited message never changes routing state and is never a command; prefixes obey the target's rules.
 */
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { insertInbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { answers, row, testGateway } from '../helpers/gateway.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-11-25T10:00:00.000Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const CLUB_CHAT = 'telegram:-100';
const PUB_CHAT = 'telegram:-300';

/** Telegram chats route to the members-only `club`, except room -300 which routes to the open `pub`. */
function setup() {
  const { db } = freshDb();
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'room=-300', 'pub')`).run();
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, 'platform=telegram', 'club')`).run();
  const t = testGateway(db, { groups: ['club', 'pub'], admins: [] });
  db.prepare(`UPDATE registered_groups SET access = 'members' WHERE folder = 'club'`).run();
  upsertMember(db, 'club', 'telegram:alice', 'member');
  t.gateway.start();
  const send = async (content: string, sender: string, chat = CLUB_CHAT, verb = 'message') => {
    const id = insertInbound(db, {
      chat_jid: chat,
      sender,
      content,
      verb,
      timestamp: new Date().toISOString(),
    })!;
    await vi.advanceTimersByTimeAsync(2000);
    return id;
  };
  const sticky = (chat = CLUB_CHAT) =>
    db.prepare(`SELECT sticky_group, sticky_topic FROM chat_state WHERE chat_jid = ?`).get(chat) ?? null;
  return { db, ...t, send, sticky };
}

it("a stranger cannot re-route a members-only chat by @name or #topic: refused, the members' messages stay", async () => {
  const { db, send, sticky, gateway } = setup();
  const set = await send('@pub', 'mallory');
  expect(answers(db, CLUB_CHAT).at(-1)).toBe(
    "refused: telegram:mallory is not a member of club; the chat's routing is unchanged",
  );
  expect(row(db, set)).toMatchObject({ state: 'command', error: 'telegram:mallory is not a member of club' });
  await send('#elsewhere', 'mallory');
  expect(answers(db, CLUB_CHAT).at(-1)).toMatch(/^refused: telegram:mallory is not a member of club/);
  expect(sticky()).toBeNull();
  const m = await send('hello agent', 'alice');
  expect(row(db, m)).toMatchObject({ state: 'ready', group_folder: 'club', session_topic: '' });
  gateway.stop();
});

it('a member may set the sticky group; a stranger of the route group may not reset it', async () => {
  const { db, send, sticky, gateway } = setup();
  await send('@pub', 'alice');
  expect(answers(db, CLUB_CHAT).at(-1)).toMatch(/now go to @pub/);
  expect(sticky()).toMatchObject({ sticky_group: 'pub' });
  // Mallory may reach pub (open) but not club, where a reset would send everyone back.
  await send('@', 'mallory');
  expect(answers(db, CLUB_CHAT).at(-1)).toMatch(/^refused: telegram:mallory is not a member of club/);
  expect(sticky()).toMatchObject({ sticky_group: 'pub' });
  await send('@', 'alice');
  expect(sticky()).toMatchObject({ sticky_group: null });
  gateway.stop();
});

it('an edited message never changes routing state and is never a command', async () => {
  const { db, send, sticky, queue, gateway } = setup();
  const e1 = await send('@pub', 'alice', CLUB_CHAT, 'edit');
  const e2 = await send('#secret', 'alice', CLUB_CHAT, 'edit');
  const e3 = await send('/new', 'alice', CLUB_CHAT, 'edit');
  expect(sticky()).toBeNull();
  expect(queue.resets).toEqual([]);
  for (const id of [e1, e2, e3]) {
    // Edits go to the agent like any message (held by the impulse gate until released), never handled.
    expect(row(db, id)).toMatchObject({ state: 'held', group_folder: 'club', session_topic: '' });
  }
  expect(answers(db, CLUB_CHAT)).toEqual([]);
  gateway.stop();
});

it("a prefix obeys the target group's rules for its sender", async () => {
  const { db, send, gateway } = setup();
  const intoClub = await send('@club let me in', 'mallory', PUB_CHAT);
  expect(row(db, intoClub)).toMatchObject({ state: 'denied', group_folder: 'club' });
  const member = await send('@club hi', 'alice', PUB_CHAT);
  expect(row(db, member)).toMatchObject({ state: 'ready', group_folder: 'club' });
  gateway.stop();
});
