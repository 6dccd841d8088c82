/**
 * Every channel's send path through a fault proxy (test/infra/fault-proxy.ts) in front of its local platform
 * server: 5xx, 429 with retry_after, connection resets before and after the platform accepted a part, and
 * requests that never get an answer. Real telegraf and discord.js, a real SQLite file, the real delivery;
 * delivery's waits are recorded instead of slept, so retry_after is asserted as a number.
 *
 * Discord posts every accepted part exactly once, even when the answer was lost after the platform accepted
 * it (the enforced nonce returns the first message). Telegram has no idempotency key: a part whose answer
 * was lost is posted twice, which is the window docs/CHANNELS.md measures; every other fault costs nothing.
 * Bluesky's send path has the same faults in test/channels/bluesky-faults.test.ts.
 */
import type { Chat } from 'telegraf/types';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { DiscordChannel } from '../../channels/discord/index.js';
import { TelegramChannel } from '../../channels/telegram/index.js';
import type { Channel } from '../../channels/channel.js';
import { createDelivery } from '../../delivery/delivery.js';
import type { Db } from '../../store/db.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { manualSleep } from '../delivery/script-channel.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { startFaultProxy, type FaultProxy, type ProxyFault } from '../infra/fault-proxy.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { cleanupAfterEach } from './support.js';

/** Aborting a request quickly keeps the test short; production uses 15–30 s. */
const SEND_TIMEOUT_MS = 1500;

/** One fault per row, in this order; the texts name them so the platform's log reads like the plan. */
const PLAN: Array<{ text: string; fault: ProxyFault | undefined; accepted: boolean }> = [
  { text: 'clean', fault: undefined, accepted: false },
  { text: 'after a 502', fault: { kind: 'status', status: 502 }, accepted: false },
  { text: 'after a reset', fault: { kind: 'reset' }, accepted: false },
  { text: 'after a timeout', fault: { kind: 'hang' }, accepted: false },
  { text: 'answer lost by a reset', fault: { kind: 'reset-after' }, accepted: true },
  { text: 'answer lost by a timeout', fault: { kind: 'hang-after' }, accepted: true },
];

interface Platform {
  channel: Channel;
  jid: string;
  /** The send path as the proxy sees it (`METHOD path`). */
  sendPath: RegExp;
  /** A 429 answer of this platform asking for `seconds` of patience. */
  rateLimit(seconds: number): ProxyFault;
  /** The texts the platform stored, in order. */
  received(): string[];
  /** Whether the platform posts a part twice when the answer to the first attempt was lost. */
  duplicatesLostAnswers: boolean;
}

describe('send paths under network and platform faults', () => {
  const defer = cleanupAfterEach();

  async function proxied(target: string): Promise<FaultProxy> {
    const proxy = await startFaultProxy(target);
    defer(() => proxy.close());
    return proxy;
  }

  async function telegram(db: Db): Promise<Platform & { proxy: FaultProxy }> {
    const api = await TelegramApiServer.start();
    defer(() => api.close());
    const chat: Chat.GroupChat = { id: -4242, type: 'group', title: 'faults' };
    api.addChat(chat);
    const proxy = await proxied(api.url);
    const channel = new TelegramChannel({
      token: api.token,
      apiRoot: proxy.url,
      db,
      log: silentLogger(),
      sendTimeoutMs: SEND_TIMEOUT_MS,
    });
    return {
      proxy,
      channel,
      jid: `telegram:${chat.id}`,
      sendPath: /^POST \/bot[^/]+\/sendMessage$/,
      rateLimit: (s) => ({
        kind: 'status',
        status: 429,
        body: {
          ok: false,
          error_code: 429,
          description: `Too Many Requests: retry after ${s}`,
          parameters: { retry_after: s },
        },
      }),
      received: () => api.sent.map((m) => m.text),
      duplicatesLostAnswers: true,
    };
  }

  async function discord(): Promise<Platform & { proxy: FaultProxy }> {
    const api = await DiscordApiServer.start();
    defer(() => api.close());
    const proxy = await proxied(new URL(api.apiRoot).origin);
    const channel = new DiscordChannel({
      token: api.token,
      apiRoot: `${proxy.url}/api`,
      log: silentLogger(),
      sendTimeoutMs: SEND_TIMEOUT_MS,
    });
    return {
      proxy,
      channel,
      jid: `discord:${api.textChannelId}`,
      sendPath: /^POST \/api\/v10\/channels\/\d+\/messages$/,
      rateLimit: (s) => ({
        kind: 'status',
        status: 429,
        body: { message: 'You are being rate limited.', retry_after: s, global: false },
        headers: { 'retry-after': String(s), 'x-ratelimit-scope': 'user' },
      }),
      received: () => api.posted.map((m) => m.content),
      duplicatesLostAnswers: false,
    };
  }

  for (const [name, make] of [
    ['telegram', telegram],
    ['discord', (_db: Db) => discord()],
  ] as const) {
    it(`${name}: every row is delivered, retry_after is honoured, and a lost answer ${
      name === 'telegram' ? 'is the only double post' : 'posts nothing twice'
    }`, async () => {
      const { db } = freshDb();
      const p = await make(db);
      const steps = [...PLAN, { text: 'after a 429', fault: p.rateLimit(3), accepted: false }];
      const ids = steps.map((step) => {
        // Aimed by text, so each fault hits the first attempt of the row it names.
        if (step.fault) p.proxy.arm({ path: p.sendPath, body: JSON.stringify(step.text) }, step.fault);
        return insertOutbound(db, { chat_jid: p.jid, content: step.text, kind: 'reply' });
      });
      const s = manualSleep(true);
      const d = createDelivery({ db, channels: [p.channel], log: silentLogger(), pollMs: 0, sleep: s.sleep });
      defer(() => d.stop());
      d.start();
      await d.idle();

      const rows = db
        .prepare(`SELECT id, delivery, parts_sent, delivery_attempts FROM messages WHERE is_from_me = 1`)
        .all() as Array<{ id: number; delivery: string; parts_sent: number; delivery_attempts: number }>;
      expect(rows).toEqual(
        steps.map((step, i) => ({
          id: ids[i],
          delivery: 'sent',
          parts_sent: 1,
          delivery_attempts: step.fault ? 1 : 0,
        })),
      );
      // Every fault was met once and cost one retry; the platform saw the accepted-but-lost ones first time.
      const faulted = p.proxy.requests.filter((r) => r.fault !== undefined);
      expect(faulted.map((r) => r.fault)).toEqual(steps.flatMap((st) => (st.fault ? [st.fault.kind] : [])));
      expect(p.proxy.requests.filter((r) => p.sendPath.test(`${r.method} ${r.path}`))).toHaveLength(
        steps.length + faulted.length,
      );
      // retry_after is waited as asked; the other five faults wait a backoff step.
      expect(s.waits).toHaveLength(faulted.length);
      expect(s.waits.filter((w) => w.ms >= 3000 && w.ms < 4000)).toHaveLength(1);
      const expected = steps.flatMap((st) =>
        st.accepted && p.duplicatesLostAnswers ? [st.text, st.text] : [st.text],
      );
      expect(p.received()).toEqual(expected);
    });
  }
});
