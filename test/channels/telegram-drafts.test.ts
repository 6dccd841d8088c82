/**
 * Streaming drafts on Telegram end to end: the whole gateway with real telegraf against the local Bot API.
 * An agent's partial blocks become one message edited in place; the answer replaces it, so the final text
 * is shown once. After a kill -9 between a draft and the answer, the restarted gateway still ends with one
 * final text and no stale draft.
 */
import Database from 'better-sqlite3';
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { closedAfterGateds, FILES_AGENT_CMD } from '../helpers/gated.js';
import { exited, spawnGated, until } from '../helpers/process.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { startE2eGated } from './e2e.js';
import { e2eConfig, type E2eSeed } from './support.js';

const chat: Chat.PrivateChat = { id: 778, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let api: TelegramApiServer | undefined;
let gated: Gated | undefined;

const SEED: E2eSeed = { groups: [['tg/stream', 'Stream']], routes: [[0, 'platform=telegram', 'tg/stream']] };

/** The settings of these tests for the local Bot API `server`, with `env` over them. */
function settings(server: TelegramApiServer, env: Record<string, string> = {}): Record<string, string> {
  return {
    TELEGRAM_BOT_TOKEN: server.token,
    TELEGRAM_API_ROOT: server.url,
    GATED_AGENT_CMD: FILES_AGENT_CMD,
    GATED_IDLE_TIMEOUT_MS: '2000',
    ...env,
  };
}

/** The whole gateway in this process (startE2eGated), once it polls the Bot API. */
async function start(server: TelegramApiServer, env: Record<string, string> = {}): Promise<Gated> {
  gated = await startE2eGated(settings(server, env), SEED);
  await server.waitForPoll();
  return gated;
}

test('a streamed turn edits one draft at least 3 times and ends as exactly one final text', async () => {
  api = closedAfterGateds(await TelegramApiServer.start());
  api.addChat(chat);
  const gated = await start(api);
  api.message({ chat, from: ada, text: 'stream 4' });
  const final = 'final: word1 word2 word3 word4 done';
  await api.waitFor(() => api!.sent.some((m) => m.text === final));
  await gated.delivery.idle();
  // One message in the chat: the draft, posted once and edited into the answer.
  expect(api.sent.map((m) => m.text)).toEqual([final]);
  expect(api.count('sendMessage')).toBe(1);
  const drafts = api.edits.filter((e) => e.text !== final);
  expect(drafts.length).toBeGreaterThanOrEqual(3);
  expect(drafts.at(-1)!.text).toBe('word1 word2 word3 word4');
  expect(api.edits.at(-1)!.text).toBe(final);
  // Drafts are never stored as replies; the answer is one row, delivered as the edited draft.
  const rows = gated.db
    .prepare(`SELECT content, delivery FROM messages WHERE is_from_me = 1`)
    .all() as Array<{ content: string; delivery: string }>;
  expect(rows).toEqual([{ content: final, delivery: 'sent' }]);
  expect(gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
});

test('in batch mode the same turn shows no draft: only the answer', async () => {
  api = closedAfterGateds(await TelegramApiServer.start());
  api.addChat(chat);
  await start(api, { GATED_STREAM_CHANNELS: 'none' });
  api.message({ chat, from: ada, text: 'stream 3' });
  const [sent] = await api.waitForSent(1);
  expect(sent!.text).toBe('final: word1 word2 word3 done');
  expect(api.edits).toEqual([]);
});

test(
  'kill -9 between a draft and the answer: after restart one final text and no stale draft',
  { timeout: 60_000 },
  async () => {
    api = closedAfterGateds(await TelegramApiServer.start());
    api.addChat(chat);
    const dir = tempDir('gated-tg-crash-');
    const cfg = e2eConfig(dir, settings(api), SEED);
    const env = {
      GATED_DB: cfg.db,
      GATED_GROUPS_DIR: cfg.groupsDir,
      GATED_POLL_MS: '50',
      GATED_HTTP_PORT: '0',
      GATED_IDLE_TIMEOUT_MS: '2000',
      GATED_LOG_LEVEL: 'warn',
      GATED_AGENT_CMD: FILES_AGENT_CMD,
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
    };
    const first = spawnGated(['run'], env);
    await api.waitForPoll();
    api.message({ chat, from: ada, text: 'hang' });
    await api.waitFor(() => api!.sent.some((m) => m.text === 'thinking about it'));
    // The draft is on screen and its id recorded: the answer is still to come.
    const watch = new Database(cfg.db, { readonly: true });
    const draftId = () => watch.prepare(`SELECT platform_msg_id FROM drafts`).pluck().get();
    await until(draftId, 10_000, 'the draft row');
    watch.close();
    first.kill('SIGKILL');
    await exited(first);

    const second = spawnGated(['run'], env);
    try {
      await until(() => api!.sent.some((m) => m.text === 'answer after restart'), 30_000, 'the answer');
      await until(() => api!.sent.length === 1, 10_000, 'one message in the chat');
      expect(api.sent.map((m) => m.text)).toEqual(['answer after restart']);
      // The re-run reused the stale draft, and the answer took it over: a second message was never needed.
      expect(api.count('sendMessage')).toBe(1);
      expect(api.edits.map((e) => e.text)).toEqual(['thinking again', 'answer after restart']);
    } finally {
      second.kill('SIGTERM');
      await exited(second);
    }
  },
);
