import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { insertInbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { row, testGateway } from '../helpers/gateway.js';

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2026-11-22T03:00:00.000Z'));
});
afterEach(() => {
  vi.useRealTimers();
});

function setup(impulse: string | null = null) {
  const { db, reopen } = freshDb();
  db.prepare(`INSERT INTO routes (seq, match, target, impulse_config) VALUES (0, '', 'g', ?)`).run(impulse);
  const t = testGateway(db, { groups: ['g'] });
  t.gateway.start();
  const send = async (verb: string, chat = 'discord:1') => {
    const id = insertInbound(db, { chat_jid: chat, sender: 'u', content: verb, verb })!;
    await vi.advanceTimersByTimeAsync(2000);
    return id;
  };
  return { db, reopen, ...t, send };
}

describe('impulse gate', () => {
  it('holds a reaction alone; a message releases it along with the reaction', async () => {
    const { db, send, gateway } = setup();
    const r = await send('reaction');
    expect(row(db, r)).toMatchObject({ state: 'held', weight: 0 });
    const m = await send('message');
    expect(row(db, m).state).toBe('ready');
    expect(row(db, r).state).toBe('ready');
    gateway.stop();
  });

  it('keeps chats apart', async () => {
    const { db, send, gateway } = setup();
    const a = await send('reaction', 'discord:a');
    await send('message', 'discord:b');
    expect(row(db, a).state).toBe('held');
    gateway.stop();
  });

  it('counts what it holds (the gated_held_messages gauge reads this)', async () => {
    const { send, gateway } = setup();
    expect(gateway.pipeline.gate.heldCount()).toBe(0);
    await send('reaction', 'discord:a');
    await send('typing', 'discord:a');
    await send('reaction', 'discord:b');
    expect(gateway.pipeline.gate.heldCount()).toBe(3);
    await send('message', 'discord:a');
    expect(gateway.pipeline.gate.heldCount()).toBe(1);
    gateway.stop();
  });

  it("uses the route's threshold: three messages of weight 100 against 300", async () => {
    const { db, send, gateway } = setup('{"threshold":300,"weights":{"follow":10}}');
    const a = await send('message');
    const b = await send('message');
    expect([row(db, a).state, row(db, b).state]).toEqual(['held', 'held']);
    const f = await send('follow');
    expect(row(db, f)).toMatchObject({ state: 'held', weight: 10 });
    const c = await send('message');
    expect([a, b, f, c].map((id) => row(db, id).state)).toEqual(['ready', 'ready', 'ready', 'ready']);
    gateway.stop();
  });

  it('releases after the maximum hold with no further traffic', async () => {
    const { db, send, gateway, queue } = setup('{"max_hold_ms":60000,"threshold":1000}');
    const id = await send('message');
    expect(row(db, id).state).toBe('held');
    const wakes = queue.wakes;
    await vi.advanceTimersByTimeAsync(55_000);
    expect(row(db, id).state).toBe('held');
    await vi.advanceTimersByTimeAsync(5_000);
    expect(row(db, id).state).toBe('ready');
    expect(queue.wakes).toBeGreaterThan(wakes);
    gateway.stop();
  });

  it('releases on the max-hold timer even when the poll interval is much longer', async () => {
    const { db } = freshDb();
    db.prepare(
      `INSERT INTO routes (seq, match, target, impulse_config) VALUES (0, '', 'g', '{"max_hold_ms":3000}')`,
    ).run();
    const { gateway } = testGateway(db, { groups: ['g'], pollMs: 3_600_000 });
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    const id = gateway.sink({ chat_jid: 'discord:1', sender: 'u', content: '👍', verb: 'reaction' })!;
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, id).state).toBe('held');
    await vi.advanceTimersByTimeAsync(3000);
    expect(row(db, id).state).toBe('ready');
    gateway.stop();
  });

  it('a restart between hold and release neither drops nor releases early', async () => {
    const { db, reopen, send, gateway } = setup('{"max_hold_ms":60000,"threshold":300}');
    const a = await send('message');
    gateway.stop();
    db.close();
    await vi.advanceTimersByTimeAsync(20_000);

    const db2 = reopen();
    const { gateway: g2 } = testGateway(db2);
    g2.start();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(row(db2, a).state).toBe('held');
    // 2 s + 20 s + 2 s have passed since the hold began; release comes at 60 s, not before.
    await vi.advanceTimersByTimeAsync(35_000);
    expect(row(db2, a).state).toBe('held');
    await vi.advanceTimersByTimeAsync(2_000);
    expect(row(db2, a).state).toBe('ready');
    g2.stop();
  });

  it('falls back to the defaults when impulse_config is invalid', async () => {
    const { db, send, gateway } = setup('{"threshold":"lots"}');
    const r = await send('reaction');
    expect(row(db, r).state).toBe('held');
    const m = await send('message');
    expect(row(db, m).state).toBe('ready');
    gateway.stop();
  });

  it("a command answered after its batch committed (a bare /stop) leaves the batch's released rows ready", async () => {
    // One batch: a message, a bare /stop (answered once the run stopped, after the batch), then messages
    // of other chats. The late answer once wrote those last rows back as held, where nothing released them.
    const { db } = freshDb();
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, '', 'g')`).run();
    const { gateway, queue } = testGateway(db, { groups: ['g'], pollMs: 3_600_000 });
    const ins = (chat: string, content: string) =>
      insertInbound(db, { chat_jid: chat, sender: 'u', content })!;
    const first = ins('discord:1', 'hello');
    const command = ins('discord:1', '/stop');
    const after = [ins('discord:2', 'one'), ins('discord:3', 'two'), ins('discord:1', 'three')];
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(queue.stops).toHaveLength(1);
    expect(row(db, command).state).toBe('command');
    const replies = db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
      .pluck()
      .all(command);
    expect(replies).toEqual(['nothing is running']);
    for (const id of [first, ...after]) expect(row(db, id).state, `row ${id}`).toBe('ready');
    expect(gateway.pipeline.gate.heldCount()).toBe(0);
    gateway.stop();
  });
});
