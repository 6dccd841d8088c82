import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { insertInbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { row, testGateway } from '../helpers/gateway.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Inserts a row the way a program writing an older database (without CHECK constraints) can. */
function legacyInsert(db: ReturnType<typeof freshDb>['db'], cols: Record<string, unknown>): number {
  db.pragma('ignore_check_constraints = ON');
  const names = Object.keys(cols);
  const info = db
    .prepare(`INSERT INTO messages (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`)
    .run(...Object.values(cols));
  db.pragma('ignore_check_constraints = OFF');
  return Number(info.lastInsertRowid);
}

describe('one bad row never stops the others', () => {
  it('a BLOB content or verb ends failed with its error; the rows after it are processed', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['demo'] });
    const before = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: 'before' })!;
    const blobContent = legacyInsert(db, { chat_jid: 'web:demo', sender: 'u', content: Buffer.from('x') });
    const blobVerb = legacyInsert(db, {
      chat_jid: 'web:demo',
      sender: 'u',
      content: 'hi',
      verb: Buffer.from([0, 1]),
    });
    const after = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: 'after' })!;
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, blobContent)).toMatchObject({
      state: 'failed',
      error: 'column content holds a 1-byte blob, not text',
    });
    expect(row(db, blobVerb)).toMatchObject({ state: 'failed', error: expect.stringMatching(/verb/) });
    expect(row(db, before).state).toBe('ready');
    expect(row(db, after).state).toBe('ready');
    expect(gateway.loop.cursor()).toBe(after);
    expect(gateway.loop.health().failures).toBe(0);
    gateway.stop();
  });
});

describe('a poisoned row in a batch of plain ones', () => {
  it('is rolled back and fails alone, whether it wrote before it threw or its placement was refused', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['demo'] });
    db.exec(
      `INSERT INTO routes (seq, match, target) VALUES (0, 'room=-1', 'demo'), (1, 'room=-7', 'builtin:ping')`,
    );
    const send = (chat: string, content: string) =>
      insertInbound(db, { chat_jid: chat, sender: 'u', content })!;
    const plain = (n: number) => Array.from({ length: n }, (_, i) => send(`telegram:-1`, `plain ${i}`));
    const before = plain(20);
    // Answers 'pong' (an outbound row), then its own row's write is refused: the answer must go too.
    const pinged = send('telegram:-7', 'ping me');
    const middle = plain(20);
    // A plain row whose placement the database refuses: it fails alone, and the rows after it are placed.
    const refused = send('telegram:-1', 'refused');
    const after = plain(20);
    db.exec(`
      CREATE TRIGGER poison_done BEFORE UPDATE OF state ON messages WHEN NEW.id = ${pinged} AND NEW.state = 'done'
      BEGIN SELECT RAISE(ABORT, 'poisoned row'); END;
      CREATE TRIGGER poison_place BEFORE UPDATE OF state ON messages
        WHEN NEW.id = ${refused} AND NEW.state IN ('held', 'ready')
      BEGIN SELECT RAISE(ABORT, 'poisoned placement'); END;`);
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);

    expect(row(db, pinged)).toMatchObject({ state: 'failed', error: expect.stringMatching(/poisoned row/) });
    expect(row(db, refused)).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/poisoned placement/),
    });
    const replies = db
      .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
      .pluck()
      .get(pinged);
    expect(replies).toBe(0);
    for (const id of [...before, ...middle, ...after]) {
      expect(row(db, id)).toMatchObject({ state: 'ready', group_folder: 'demo', error: null });
    }
    // Each plain row counted once on its route; the refused one and the failed ping not at all.
    const hits = db.prepare(`SELECT route_id, hits FROM route_hits ORDER BY route_id`).all();
    expect(hits).toEqual([{ route_id: 1, hits: 60 }]);
    expect(gateway.loop.cursor()).toBe(after.at(-1));
    expect(gateway.loop.health().failures).toBe(0);
    gateway.stop();
  });
});

describe('a database that refuses writes (disk full, I/O errors)', () => {
  it('backs off instead of retrying on every wake, and resumes by itself', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['demo'], pollMs: 100 });
    // Every write of the pipeline fails, as on a full disk.
    db.exec(
      `CREATE TRIGGER full BEFORE UPDATE ON messages BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`,
    );
    const id = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: 'waits' })!;
    gateway.start();
    // The commit watcher wakes the loop on every (failed) write; a minute of that must not spin.
    for (let t = 0; t < 60_000; t += 10) {
      gateway.loop.wake();
      await vi.advanceTimersByTimeAsync(10);
    }
    const { failures, failing } = gateway.loop.health();
    expect(failing).toMatch(/disk is full/);
    // 100 ms doubling to the 30 s cap: 0.1+0.2+…+25.6+30 s covers a minute in about 10 tries.
    expect(failures).toBeGreaterThan(3);
    expect(failures).toBeLessThan(15);
    expect(row(db, id).state).toBeNull();

    db.exec('DROP TRIGGER full');
    await vi.advanceTimersByTimeAsync(31_000);
    expect(row(db, id).state).toBe('ready');
    expect(gateway.loop.health()).toMatchObject({ failures: 0, failing: undefined });
    gateway.stop();
  });
});

describe('layers do not widen what a chat can reach', () => {
  it('a command addressed to another bot is text; one addressed to this bot is a command', async () => {
    const { parseCommand } = await import('../../gateway/layers/commands.js');
    expect(parseCommand('/ping@otherbot', 'my_bot')).toBeUndefined();
    expect(parseCommand('/stop@otherbot', 'my_bot')).toBeUndefined();
    expect(parseCommand('/ping@My_Bot', 'my_bot')).toEqual({ name: 'ping', args: [] });
    const { db } = freshDb();
    const { createGateway } = await import('../../gateway/gateway.js');
    const { RecordingQueue } = await import('../helpers/gateway.js');
    const { silentLogger } = await import('../../core/log.js');
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'demo')`).run();
    testGateway(db, { groups: ['demo'] });
    const gateway = createGateway({
      db,
      config: { pollMs: 2000, admins: [] },
      log: silentLogger(),
      queue: new RecordingQueue(),
      channels: [{ platform: 'telegram', identity: { username: 'my_bot' } }],
    });
    const other = insertInbound(db, { chat_jid: 'telegram:-1', sender: 'u', content: '/ping@otherbot' })!;
    const mine = insertInbound(db, { chat_jid: 'telegram:-1', sender: 'u', content: '/ping@my_bot' })!;
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, other).state).toBe('ready');
    expect(row(db, mine).state).toBe('command');
    gateway.stop();
  });

  it('@name and a sticky @name from a chat no route sends anywhere reach no group', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['demo'] });
    const prefixed = insertInbound(db, { chat_jid: 'telegram:-9', sender: 'u', content: '@demo hello' })!;
    const sticky = insertInbound(db, { chat_jid: 'telegram:-9', sender: 'u', content: '@demo' })!;
    const after = insertInbound(db, { chat_jid: 'telegram:-9', sender: 'u', content: 'still nobody' })!;
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, prefixed)).toMatchObject({ state: 'unrouted', group_folder: null });
    expect(row(db, sticky).state).toBe('command');
    expect(row(db, after)).toMatchObject({ state: 'unrouted', group_folder: null });
    gateway.stop();
  });

  it('a stripped prefix reaches the agent; the stored row keeps the text as written', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['demo', 'demo/sub'] });
    const id = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: '@sub hello there' })!;
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, id)).toMatchObject({
      state: 'ready',
      group_folder: 'demo/sub',
      content: '@sub hello there',
    });
    expect(db.prepare('SELECT agent_content FROM messages WHERE id = ?').pluck().get(id)).toBe('hello there');
    gateway.stop();
  });
});

describe('the low-severity holes of issue 22', () => {
  it('/ping@otherbot is text while this gateway does not know its own name (Telegram in another process)', async () => {
    const { db } = freshDb();
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'demo')`).run();
    const { gateway } = testGateway(db, { groups: ['demo'] });
    gateway.start();
    const send = async (content: string) => {
      const id = insertInbound(db, { chat_jid: 'telegram:-1', sender: 'u', content })!;
      await vi.advanceTimersByTimeAsync(2000);
      return row(db, id).state;
    };
    // No channel in this process and no stored name: no suffix can be told to be this gateway's.
    expect(await send('/ping@otherbot')).toBe('ready');
    // The Telegram channel (in whatever process runs it) stored its name: its own suffix is a command.
    db.prepare(`INSERT INTO router_state (key, value) VALUES ('telegram.username', 'my_bot')`).run();
    expect(await send('/ping@otherbot')).toBe('ready');
    expect(await send('/ping@my_bot')).toBe('command');
    expect(await send('/ping')).toBe('command');
    gateway.stop();
  });

  it('GATED_ADMINS=telegram:500 may /status on Telegram, not as 500 elsewhere; a bare id on every platform but the web chat', async () => {
    const { db } = freshDb();
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, '', 'demo')`).run();
    const { gateway } = testGateway(db, { groups: ['demo'], admins: ['telegram:500', '77'] });
    gateway.start();
    const status = async (chat_jid: string, sender: string) => {
      const id = insertInbound(db, { chat_jid, sender, content: '/status' })!;
      await vi.advanceTimersByTimeAsync(2000);
      return db
        .prepare(`SELECT content FROM messages WHERE reply_to_id = ? AND is_from_me = 1`)
        .pluck()
        .get(id) as string;
    };
    expect(await status('telegram:-1', '500')).toMatch(/^groups: 1\nactive runs: 0/);
    expect(await status('discord:9', '500')).toBe('/status is for admins (GATED_ADMINS)');
    expect(await status('telegram:-1', '501')).toBe('/status is for admins (GATED_ADMINS)');
    expect(await status('discord:9', '77')).toMatch(/^groups: 1/);
    expect(await status('slack:C1', '77')).toMatch(/^groups: 1/);
    // The web chat's senders are ids gated issues: GATED_ADMINS names none (docs/SECURITY.md, "Identities").
    expect(await status('web:demo', '77')).toBe('/status is for admins (GATED_ADMINS)');
    gateway.stop();
  });

  it('a row of only whitespace never reaches an agent; a caption-less file does', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['demo'] });
    const blank = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: ' \n\t\u00a0 ' })!;
    const empty = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: '' })!;
    const photo = insertInbound(db, {
      chat_jid: 'web:demo',
      sender: 'u',
      content: '  ',
      attachments: [{ kind: 'photo', name: 'a.jpg', mime: 'image/jpeg', size: null, source: 'x' }],
    })!;
    const words = insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: ' hi ' })!;
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    for (const id of [blank, empty]) {
      expect(row(db, id)).toMatchObject({
        state: 'dropped',
        group_folder: null,
        error: 'empty: only whitespace and no files',
      });
    }
    expect(row(db, photo)).toMatchObject({ state: 'ready', group_folder: 'demo' });
    expect(row(db, words)).toMatchObject({ state: 'ready', group_folder: 'demo' });
    gateway.stop();
  });
});
