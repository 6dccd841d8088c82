/**
 * One group, ten chats (bench/README.md, "Chats of one group"): a whole gated with the Claude agent (process
 * runtime) against the local Messages API, the group routed from ten Telegram chats (telegraf against the
 * local Bot API). The chats take turns: chat 1 writes, and once it has its answer chat 2 writes, and so on,
 * twice round. Printed per message: the time from the message reaching the Bot API to the chat's first
 * draft, and to its answer. Before a run made way for another chat of its session (docs/QUEUE.md), a chat
 * waited for the previous chat's idle run to time out (GATED_IDLE_TIMEOUT_MS, 10 s here; 30 s by default).
 *
 *   npx tsx bench/chats.ts [idle timeout ms]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../core/config.js';
import { silentLogger } from '../core/log.js';
import { startGated } from '../gated/app.js';
import { openDatabase } from '../store/db.js';
import { addGroup } from '../store/groups.js';
import { MessagesApiServer } from '../test/infra/messages-api.js';
import { TelegramApiServer } from '../test/infra/telegram-api.js';

const CHATS = 10;
const idleMs = Number(process.argv[2] ?? 10_000);

async function until<T>(fn: () => T | undefined | null | false, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const dir = mkdtempSync(join(tmpdir(), 'gated-chats-bench-'));
const api = await MessagesApiServer.start();
const tg = await TelegramApiServer.start();
const chats = Array.from({ length: CHATS }, (_, i) => ({
  id: 9100 + i,
  type: 'private' as const,
  first_name: `U${i}`,
}));
for (const c of chats) tg.addChat(c);
const config = loadConfig({
  GATED_DB: join(dir, 'gated.db'),
  GATED_GROUPS_DIR: join(dir, 'groups'),
  GATED_POLL_MS: '50',
  GATED_RUNTIME: 'process',
  GATED_IDLE_TIMEOUT_MS: String(idleMs),
  GATED_AGENT_CMD: `node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`,
  GATED_AGENT_SECRETS: 'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL',
  ANTHROPIC_API_KEY: 'sk-ant-bench-only',
  ANTHROPIC_BASE_URL: api.url,
  TELEGRAM_BOT_TOKEN: tg.token,
  TELEGRAM_API_ROOT: tg.url,
  GATED_STREAM_CHANNELS: 'telegram',
});
const db = openDatabase(config.db);
addGroup(db, config.groupsDir, 'claude', 'Claude');
db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'claude')`).run();
db.close();
const gated = await startGated({ config, log: silentLogger(), http: false });
const draftMs: number[] = [];
const answerMs: number[] = [];
try {
  await tg.waitForPoll();
  for (let round = 1; round <= 2; round++) {
    for (const c of chats) {
      const word = `r${round}-${c.id}`;
      const seen = tg.sent.length;
      const t0 = Date.now();
      tg.message({
        chat: c,
        from: { id: c.id, is_bot: false, first_name: c.first_name },
        text: `SAY answer ${word}`,
      });
      const first = await until(
        () => tg.sent.slice(seen).find((m) => m.chat_id === c.id),
        120_000,
        'a draft',
      );
      const draft = Date.now() - t0;
      await until(
        () =>
          tg.sent.slice(seen).some((m) => m.chat_id === c.id && m.text === `answer ${word}`) ||
          tg.edits.some((e) => e.message_id === first.message_id && e.text === `answer ${word}`) ||
          first.text === `answer ${word}`,
        120_000,
        'the answer',
      );
      const answer = Date.now() - t0;
      draftMs.push(draft);
      answerMs.push(answer);
      process.stdout.write(`round ${round} chat ${c.id}: first draft ${draft} ms, answer ${answer} ms\n`);
    }
  }
  const runs = gated.db.prepare(`SELECT count(*) FROM session_log`).pluck().get();
  process.stdout.write(
    `${answerMs.length} messages, ${String(runs)} runs: first draft p50 ${p50(draftMs)} ms (max ${Math.max(...draftMs)}), ` +
      `answer p50 ${p50(answerMs)} ms (max ${Math.max(...answerMs)})\n`,
  );
} finally {
  await gated.close(5000);
  await tg.close();
  await api.close();
  rmSync(dir, { recursive: true, force: true });
}
