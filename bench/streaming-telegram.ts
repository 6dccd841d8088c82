import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { User } from 'telegraf/types';
import { loadConfig } from '../core/config.js';
import { silentLogger } from '../core/log.js';
import { startGated } from '../gated/app.js';
import { openDatabase } from '../store/db.js';
import { TelegramApiServer, TELEGRAM_LIMITS } from '../test/infra/telegram-api.js';
import { streamAgentCmd, streamRun, type StreamSide } from './streaming.js';

/**
 * The concurrent streaming scenario (bench/streaming.ts) over Telegram: real telegraf against the local
 * Bot API server (test/infra/telegram-api.ts) with Telegram's flood limits on (about one message a second
 * per chat with a burst of 3, 30 a second per bot; sends, edits and deletes counted; 429 with retry_after
 * past them). What a chat showed is read off the server: a draft is a message posted with the stream's
 * words, an answer the text `answer tok-N` sent or edited in; an answer put there twice, or a chat left with
 * a stale draft beside its answer, counts as answered twice.
 */

const FIRST_CHAT = 1000;
const user: User = { id: 42, is_bot: false, first_name: 'Ada' };

/** What the server shows, read incrementally (the canary asks every few ms). */
class TelegramSide implements StreamSide {
  readonly firstDraftAt = new Map<string, number>();
  private readonly answers = new Map<string, number>();
  private readonly puts = new Map<string, number>();
  private posts = 0;
  private editsRead = 0;
  private draftEdits = 0;

  constructor(
    private readonly api: TelegramApiServer,
    /** The streaming chats (the canary's, after them, has an answer per question). */
    private readonly streams: number,
  ) {}

  jid(g: number): string {
    return `telegram:${FIRST_CHAT + g}`;
  }

  ask(g: number, content: string): void {
    const id = FIRST_CHAT + g;
    this.api.message({ chat: { id, type: 'private', first_name: `C${g}` }, from: user, text: content });
  }

  shownAt(tok: string): number | undefined {
    this.read();
    return this.answers.get(tok);
  }

  twice(): number {
    this.read();
    const chats = new Map<number, number>();
    for (const m of this.api.sent) {
      if (m.chat_id < FIRST_CHAT + this.streams) chats.set(m.chat_id, (chats.get(m.chat_id) ?? 0) + 1);
    }
    let n = 0;
    for (const [, shown] of chats) if (shown > 1) n += 1;
    for (const [, put] of this.puts) if (put > 1) n += 1;
    return n;
  }

  opened(): number {
    this.read();
    return this.firstDraftAt.size;
  }

  edits(): number {
    this.read();
    return this.draftEdits;
  }

  callsPerSecondMax(): number {
    const t0 = Math.min(...this.api.posts.map((p) => p.at));
    const perSecond = new Map<number, number>();
    for (const at of [...this.api.posts.map((p) => p.at), ...this.api.editedAt]) {
      const s = Math.floor((at - t0) / 1000);
      perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
    }
    return Math.max(...perSecond.values());
  }

  more(): Record<string, number> {
    return {
      tg429Drafts:
        (this.api.limited.get('editMessageText') ?? 0) + (this.api.limited.get('deleteMessage') ?? 0),
      tg429Sends: this.api.limited.get('sendMessage') ?? 0,
    };
  }

  private read(): void {
    const { posts, edits, editedAt } = this.api;
    for (; this.posts < posts.length; this.posts++) {
      const p = posts[this.posts]!;
      if (!this.answer(p.text, p.at)) {
        const jid = `telegram:${p.chat_id}`;
        if (!this.firstDraftAt.has(jid)) this.firstDraftAt.set(jid, p.at);
      }
    }
    for (; this.editsRead < edits.length; this.editsRead++) {
      const e = edits[this.editsRead]!;
      if (!this.answer(e.text, editedAt[this.editsRead]!)) this.draftEdits += 1;
    }
  }

  /** Counts an answer's text put on the platform at `at`; false when `text` is not an answer. */
  private answer(text: string, at: number): boolean {
    if (!text.startsWith('answer ')) return false;
    for (const tok of text.match(/tok-\d+/g) ?? []) {
      if (!this.answers.has(tok)) this.answers.set(tok, at);
      this.puts.set(tok, (this.puts.get(tok) ?? 0) + 1);
    }
    return true;
  }
}

/** `chats` chats streaming `streamMs` answers at once over Telegram, and a canary (bench/streaming.ts). */
export async function streamingTelegram(chats: number, streamMs: number) {
  const api = await TelegramApiServer.start();
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-tg-'));
  const db = openDatabase(join(dir, 'gated.db'));
  db.transaction(() => {
    const g = db.prepare('INSERT INTO registered_groups (folder) VALUES (?)');
    const r = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
    for (let i = 0; i <= chats; i++) {
      g.run(`t/g${i}`);
      r.run(i, `platform=telegram room=${FIRST_CHAT + i}`, `t/g${i}`);
      mkdirSync(join(dir, 'groups', 't', `g${i}`), { recursive: true });
      api.addChat({ id: FIRST_CHAT + i, type: 'private', first_name: `C${i}` });
    }
  })();
  db.close();
  const gated = await startGated({
    config: loadConfig({
      GATED_DB: join(dir, 'gated.db'),
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_MAX_CONCURRENT: String(chats + 1),
      GATED_IDLE_TIMEOUT_MS: '5000',
      GATED_POLL_MS: '100',
      GATED_HISTORY_DAYS: '0',
      GATED_HTTP_PORT: '0',
      GATED_RUNTIME: 'process',
      GATED_STREAM_CHANNELS: 'telegram',
      GATED_AGENT_CMD: streamAgentCmd(streamMs),
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
    }),
    log: silentLogger(),
    http: true,
  });
  try {
    await api.waitForPoll();
    api.rateLimits(TELEGRAM_LIMITS);
    const side = new TelegramSide(api, chats);
    return { ...(await streamRun(gated, side, chats, streamMs)), scenario: 'streaming-telegram' };
  } finally {
    await gated.close(2000);
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
