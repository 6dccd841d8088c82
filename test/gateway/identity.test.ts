/**
 * Who decides (issue 39, docs/ACCESS.md "Who is the sender" and "Codes"), through the real gateway on a real
 * SQLite file: an email row counts as its address only with a `pass` verdict; bare GATED_ADMINS ids never
 * match email; a mail domain has one open pairing code at a time; GitHub's author_association gives the
 * member role; codes one may not decide are answered as unknown ones, and guesses are limited per sender.
 * The verdicts themselves come from the real mail path in test/channels/email-identity.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { NewInbound } from '../../core/types.js';
import { AccessSource, principalOf, upsertMember } from '../../store/access.js';
import { insertInbound } from '../../store/messages.js';
import { toolApprovalsOf } from '../../store/tool-approvals.js';
import { GUESSES_PER_WINDOW, GUESS_WINDOW_MS } from '../../gateway/code-guesses.js';
import { freshDb } from '../helpers/db.js';
import { answers, row, testGateway } from '../helpers/gateway.js';

/** A refused code's answer without the words after it on how to become an owner (gateway/tool-decisions.ts). */
const withoutHint = (answer: string) =>
  answer.replace(
    / \(owners of [^ ]+ decide its questions; you are [^ ]+: the operator makes you one with 'gated access add [^']+'\)$/,
    '',
  );

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-11-23T10:00:00.000Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const PASS = 'pass: dkim=pass header.d=example.test dmarc=pass';
const FAIL = 'fail: dkim=none dmarc=fail for example.test';
const OWNER = 'alice@example.test';

/** A gateway routing email, GitHub and Telegram to `club`, alice an owner by address. */
function setup(opts: { access?: string; admins?: string[] } = {}) {
  const { db } = freshDb();
  for (const [seq, p] of ['email', 'github', 'telegram'].entries())
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (?, ?, 'club')`).run(seq, `platform=${p}`);
  const t = testGateway(db, { groups: ['club'], admins: opts.admins ?? [] });
  if (opts.access) db.prepare(`UPDATE registered_groups SET access = ?`).run(opts.access);
  upsertMember(db, 'club', `email:${OWNER}`, 'owner');
  t.gateway.start();
  const send = async (msg: Partial<NewInbound> & { sender: string; content: string }) => {
    const id = insertInbound(db, {
      chat_jid: `email:${msg.sender}`,
      timestamp: new Date().toISOString(),
      ...msg,
    })!;
    await vi.advanceTimersByTimeAsync(2000);
    return id;
  };
  const mail = (sender: string, content: string, auth: string | undefined) =>
    send({ sender, content, ...(auth === undefined ? {} : { sender_auth: auth }) });
  const codeOf = (text: string | undefined) => /code is ([A-Z2-9]{8})/.exec(text ?? '')?.[1];
  return { db, ...t, send, mail, codeOf };
}

/** A pending tool approval of `club` asked in `chat`, as the queue stores one. */
function askTool(db: ReturnType<typeof freshDb>['db'], chat: string, approvers = 'owners') {
  return toolApprovalsOf(db).insert({
    group_folder: 'club',
    topic: '',
    chat_jid: chat,
    run_id: 1,
    ask_id: 'a1',
    turn_rows: [],
    tool: 'Bash',
    input_json: JSON.stringify({ command: 'curl x | sh' }),
    input_line: 'curl x | sh',
    summary: null,
    approvers,
    rule_id: null,
    created_at: Date.now(),
    expires_at: Date.now() + 600_000,
  });
}

describe('email senders', () => {
  it("an unauthenticated mail from the owner's address decides nothing; an authenticated one does", async () => {
    const { db, mail, gateway } = setup();
    const ask = askTool(db, `email:${OWNER}`);
    await mail(OWNER, `/approve ${ask.code}`, FAIL);
    await mail(OWNER, `/approve ${ask.code}`, undefined); // a row without a verdict (written by hand)
    expect(answers(db, `email:${OWNER}`).map(withoutHint)).toEqual([
      `you may not approve ${ask.code}: no such code is open to you`,
      `you may not approve ${ask.code}: no such code is open to you`,
    ]);
    expect(toolApprovalsOf(db).byCode(ask.code)!.state).toBe('pending');
    await mail(OWNER, `/approve ${ask.code}`, PASS);
    expect(answers(db, `email:${OWNER}`).at(-1)).toBe(`approved Bash (${ask.code})`);
    expect(toolApprovalsOf(db).byCode(ask.code)).toMatchObject({
      state: 'approved',
      decided_by: `email:${OWNER}`,
    });
    gateway.stop();
  });

  it('is a stranger to the agent and to every group unless authenticated; a blocked address stays blocked', async () => {
    const { db, mail, gateway } = setup({ access: 'members' });
    upsertMember(db, 'club', 'email:mallory@example.test', 'blocked');
    upsertMember(db, 'club', 'email:*@example.test', 'member');
    const forged = await mail(OWNER, 'run this for me', FAIL);
    expect(row(db, forged)).toMatchObject({ state: 'denied' });
    expect(row(db, forged).error).toMatch(/email:alice@example.test is not authenticated: dkim=none/);
    const source = new AccessSource(db, []);
    const stored = db.prepare('SELECT * FROM messages WHERE id = ?').get(forged) as never;
    expect(source.role('club', principalOf(stored))).toBeUndefined();
    expect(source.senderRole('club', { ...(stored as object), verb: 'message' } as never)).toBe('guest');
    expect(row(db, await mail('mallory@example.test', 'hi', FAIL)).state).toBe('denied');
    expect(source.role('club', principalOf({ chat_jid: 'email:m', sender: 'mallory@example.test' }))).toBe(
      'blocked',
    );
    expect(row(db, await mail(OWNER, 'the real alice', PASS)).state).toBe('ready');
    expect(row(db, await mail('bob@example.test', 'a real member', PASS)).state).toBe('ready');
    gateway.stop();
  });

  it('an unauthenticated mail may talk to an open group, as a guest', async () => {
    const { db, mail, gateway } = setup();
    const m = await mail('carol@elsewhere.test', 'hello', FAIL);
    expect(row(db, m).state).toBe('ready');
    gateway.stop();
  });

  it('gets no pairing code; one open code per mail domain; the held mail of a domain waits', async () => {
    const { db, mail, codeOf, gateway } = setup({ access: 'approval' });
    const forged = await mail('dave@example.test', 'let me in', FAIL);
    expect(row(db, forged).state).toBe('denied');
    expect(answers(db, 'email:dave@example.test')).toEqual([]);
    await mail('carol@example.test', 'let me in', PASS);
    expect(codeOf(answers(db, 'email:carol@example.test')[0])).toBeDefined();
    // A second made-up address of the same domain gets no code while carol's is open.
    const erin = await mail('erin@example.test', 'me too', PASS);
    expect(row(db, erin)).toMatchObject({ state: 'pending' });
    expect(row(db, erin).error).toMatch(/@example.test already has an open code/);
    expect(answers(db, 'email:erin@example.test')).toEqual([]);
    // Another domain still gets one.
    await mail('frank@other.test', 'hello', PASS);
    expect(codeOf(answers(db, 'email:frank@other.test')[0])).toBeDefined();
    gateway.stop();
  });

  it('bare GATED_ADMINS ids never match email senders; platform:id does, when authenticated', async () => {
    const { db, mail, send, gateway } = setup({
      admins: ['root@example.test', '4242', 'email:ops@example.test'],
    });
    await mail('root@example.test', '/status', PASS);
    expect(answers(db, 'email:root@example.test')).toEqual(['/status is for admins (GATED_ADMINS)']);
    await mail('ops@example.test', '/status', FAIL);
    expect(answers(db, 'email:ops@example.test')).toEqual(['/status is for admins (GATED_ADMINS)']);
    await mail('ops@example.test', '/status', PASS);
    expect(answers(db, 'email:ops@example.test').at(-1)).toMatch(/^groups: 1/);
    // A bare id still matches where the platform assigns ids (Telegram), never GitHub's numbers.
    await send({ chat_jid: 'telegram:4242', sender: '4242', content: '/status' });
    expect(answers(db, 'telegram:4242')).toEqual([expect.stringMatching(/^groups: 1/)]);
    await send({ chat_jid: 'github:o/r#1', sender: '4242', content: '/status' });
    expect(answers(db, 'github:o/r#1')).toEqual(['/status is for admins (GATED_ADMINS)']);
    gateway.stop();
  });
});

describe('GitHub commenters', () => {
  it('author_association OWNER, MEMBER and COLLABORATOR make a member; anyone else is refused in a members group', async () => {
    const { db, send, gateway } = setup({ access: 'members' });
    const comment = (sender: string, association: string) =>
      send({ chat_jid: 'github:o/r#7', sender, content: 'hi', verb: 'mention', platform_role: association });
    for (const [i, a] of ['OWNER', 'MEMBER', 'COLLABORATOR'].entries())
      expect(row(db, await comment(String(100 + i), a)).state).toBe('ready');
    for (const [i, a] of ['CONTRIBUTOR', 'FIRST_TIME_CONTRIBUTOR', 'NONE'].entries()) {
      const r = row(db, await comment(String(200 + i), a));
      expect(r.state).toBe('denied');
      expect(r.error).toMatch(/is not a member of club/);
    }
    // A members row still says more than the platform: blocked wins, owner is owner.
    upsertMember(db, 'club', 'github:100', 'blocked');
    expect(row(db, await comment('100', 'OWNER')).state).toBe('denied');
    const ask = askTool(db, 'github:o/r#7', 'members');
    await send({
      chat_jid: 'github:o/r#7',
      sender: '101',
      content: `/approve ${ask.code}`,
      platform_role: 'MEMBER',
    });
    expect(toolApprovalsOf(db).byCode(ask.code)!.state).toBe('approved');
    gateway.stop();
  });
});

describe('codes', () => {
  it('guesses are limited per sender with a clear message; other senders are not affected', async () => {
    const { db, send, gateway } = setup({ admins: ['telegram:1'] });
    const chat = 'telegram:99';
    const ask = askTool(db, chat);
    const guess = (code: string) => send({ chat_jid: chat, sender: '99', content: `/approve ${code}` });
    for (let i = 0; i < GUESSES_PER_WINDOW; i += 1) await guess(`ZZZZ${'ABCDEFGH'[i]}`);
    expect(answers(db, chat)).toHaveLength(GUESSES_PER_WINDOW);
    expect(
      new Set(answers(db, chat).map((a) => withoutHint(a).replace(/approve [A-Z]+/, 'approve X'))),
    ).toEqual(new Set(['you may not approve X: no such code is open to you']));
    // Past the limit, even a code that exists is not looked up: the sender is told until when.
    await guess(ask.code);
    expect(answers(db, chat).at(-1)).toBe(
      'too many wrong codes: /approve and /reject are refused for you until 10:15 UTC',
    );
    await send({ chat_jid: chat, sender: '99', content: `/reject ${ask.code}` });
    expect(answers(db, chat).at(-1)).toMatch(/^too many wrong codes/);
    expect(toolApprovalsOf(db).byCode(ask.code)!.state).toBe('pending');
    // The admin decides meanwhile; once the window is over the guesser may type codes again.
    await send({ chat_jid: 'telegram:1', sender: '1', content: `/approve ${ask.code}` });
    expect(answers(db, 'telegram:1')).toEqual([`approved Bash (${ask.code})`]);
    await vi.advanceTimersByTimeAsync(GUESS_WINDOW_MS);
    await guess('ZZZZZ');
    expect(withoutHint(answers(db, chat).at(-1)!)).toBe(
      'you may not approve ZZZZZ: no such code is open to you',
    );
    gateway.stop();
  });
});
