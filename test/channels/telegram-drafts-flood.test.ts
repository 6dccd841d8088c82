/**
 * Many chats streaming at once on Telegram, with the local Bot API enforcing Telegram's flood limits (about
 * one message a second per chat with a short burst, 30 a second per bot, edits and deletes counted, 429
 * with retry_after past them): the drafts keep to the platform's share (PlatformRow.draftsPerSecond), a
 * 429 holds them for its wait, and an answer that meets one is retried by delivery after it. Every chat
 * ends with exactly one message, its answer, shown once: no answer lost or sent twice, no draft left.
 */
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { TelegramApiServer, type RateLimits, TELEGRAM_LIMITS } from '../infra/telegram-api.js';
import { startE2eGated } from './e2e.js';

const CHATS = 50;
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };
const chats: Chat.PrivateChat[] = Array.from({ length: CHATS }, (_, i) => ({
  id: 5000 + i,
  type: 'private',
  first_name: `Ada${i}`,
}));

let api: TelegramApiServer | undefined;
let gated: Gated | undefined;

/** 50 chats each ask for a stream of `streamMs`; resolves once every chat shows its answer. */
async function streamAll(limits: RateLimits, streamMs: number): Promise<TelegramApiServer> {
  api = closedAfterGateds(await TelegramApiServer.start());
  for (const c of chats) api.addChat(c);
  // A group per chat: each chat's agent runs at once, none waits for another's.
  const groups = chats.map((c): [string, string] => [`tg/c${c.id}`, `C${c.id}`]);
  const routes = chats.map((c, i): [number, string, string] => [
    i,
    `platform=telegram room=${c.id}`,
    `tg/c${c.id}`,
  ]);
  gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
      GATED_MAX_CONCURRENT: String(CHATS),
      GATED_IDLE_TIMEOUT_MS: '2000',
      GATED_AGENT_CMD: `STREAM_MS=${streamMs} exec bash '${packageFile('bench', 'stream-agent.sh')}'`,
    },
    { groups, routes },
  );
  await api.waitForPoll();
  api.rateLimits(limits);
  for (const c of chats) api.message({ chat: c, from: ada, text: `tell me a long story tok-${c.id}` });
  const server = api;
  const answered = (c: Chat) => server.sent.some((m) => m.chat_id === c.id && m.text.startsWith('answer '));
  await server.waitFor(() => chats.every(answered));
  await gated.delivery.idle();
  return server;
}

/** What each chat shows, and how often each answer was put on the platform (a send or an edit to it). */
function outcome(server: TelegramApiServer) {
  return chats.map((c) => {
    const answer = `answer tok-${c.id}`;
    const put =
      server.posts.filter((p) => p.chat_id === c.id && p.text.trim() === answer).length +
      server.edits.filter((e) => e.chat_id === c.id && e.text.trim() === answer).length;
    const shown = server.sent.filter((m) => m.chat_id === c.id).map((m) => m.text.trim());
    // Its draft was posted (and then edited into the answer, or replaced by it).
    const drafted = server.posts.some((p) => p.chat_id === c.id && p.text.includes('word'));
    return { chat: c.id, shown, put, drafted };
  });
}

test(
  `${CHATS} chats streaming at once under Telegram's flood limits: each answer shown exactly once, none lost`,
  { timeout: 120_000 },
  async () => {
    const server = await streamAll(TELEGRAM_LIMITS, 5000);
    expect(outcome(server)).toEqual(
      chats.map((c) => ({ chat: c.id, shown: [`answer tok-${c.id}`], put: 1, drafted: true })),
    );
    const rows = gated!.db
      .prepare(`SELECT count(*) AS n, sum(delivery = 'sent') AS sent FROM messages WHERE is_from_me = 1`)
      .get();
    expect(rows).toEqual({ n: CHATS, sent: CHATS });
    expect(gated!.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
  },
);

test(
  'with a bot limit below the drafts’ share, draft edits meet 429s and every answer still comes once',
  { timeout: 120_000 },
  async () => {
    const server = await streamAll(
      { perChat: TELEGRAM_LIMITS.perChat, perBot: { perSecond: 8, burst: 8 } },
      4000,
    );
    // At 8 calls a second for 50 chats some turns end before their draft's turn came: their answer is sent
    // as a message of its own. Whatever the 429s, each chat ends with its answer alone, put there once.
    expect(outcome(server).map(({ drafted: _, ...o }) => o)).toEqual(
      chats.map((c) => ({ chat: c.id, shown: [`answer tok-${c.id}`], put: 1 })),
    );
    expect(server.limited.get('editMessageText') ?? 0).toBeGreaterThan(0);
    expect(gated!.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
  },
);
