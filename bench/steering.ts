/**
 * Steering latency (bench/README.md, "Steering"): a whole gated with the Claude agent (process runtime)
 * against the local Messages API, answering a Telegram chat (telegraf against the local Bot API). The model
 * streams a long answer; `/interrupt better idea` is sent while it streams. Printed per round: the time from
 * the /interrupt reaching the Bot API to the Messages API stream being cut, and to the next turn's first
 * draft (or answer) reaching the chat.
 */
import { silentLogger } from '../core/log.js';
import { startGated } from '../gated/app.js';
import { loadConfig } from '../core/config.js';
import { openDatabase } from '../store/db.js';
import { addGroup } from '../store/groups.js';
import { MessagesApiServer } from '../test/infra/messages-api.js';
import { TelegramApiServer } from '../test/infra/telegram-api.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const chat = { id: 880, type: 'private' as const, first_name: 'Ada' };
const ada = { id: 44, is_bot: false, first_name: 'Ada' };

async function until<T>(fn: () => T | undefined | null | false, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** One round: returns [ms to the stream cut, ms to the next turn's first text in the chat]. */
async function round(): Promise<[number, number]> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-steer-bench-'));
  const api = await MessagesApiServer.start();
  const tg = await TelegramApiServer.start();
  tg.addChat(chat);
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_POLL_MS: '50',
    GATED_RUNTIME: 'process',
    GATED_AGENT_CMD: `node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`,
    GATED_AGENT_SECRETS: 'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL,CLAUDE_CODE_MAX_RETRIES',
    ANTHROPIC_API_KEY: 'sk-ant-bench-only',
    ANTHROPIC_BASE_URL: api.url,
    CLAUDE_CODE_MAX_RETRIES: '0',
    TELEGRAM_BOT_TOKEN: tg.token,
    TELEGRAM_API_ROOT: tg.url,
  });
  const db = openDatabase(config.db);
  addGroup(db, config.groupsDir, 'claude', 'Claude');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'claude')`).run();
  db.close();
  const gated = await startGated({ config, log: silentLogger(), http: false });
  try {
    await tg.waitForPoll();
    tg.message({ chat, from: ada, text: 'SLOW 60' });
    const req = await until(() => api.turns.find((r) => r.cutMs === null), 60_000, 'the stream');
    // Streaming drafts for a while (the draft throttle is 1 s).
    await until(() => tg.edits.length >= 2, 30_000, 'drafts');
    const t0 = Date.now();
    tg.message({ chat, from: ada, text: '/interrupt better idea' });
    const cut = await until(() => req.cutMs, 30_000, 'the cut');
    await until(
      () => tg.sent.find((m) => m.text.startsWith('echo')) ?? tg.edits.find((e) => e.text.startsWith('echo')),
      60_000,
      'the next turn in the chat',
    );
    return [cut - t0, Date.now() - t0];
  } finally {
    await gated.close(5000);
    await tg.close();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const rounds = Number(process.argv[2] ?? 3);
for (let i = 1; i <= rounds; i++) {
  const [cut, next] = await round();
  process.stdout.write(
    `round ${i}: /interrupt → stream cut ${cut} ms, → next turn's first text ${next} ms\n`,
  );
}
