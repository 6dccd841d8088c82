/**
 * Telegram's double-send window: the time between the Bot API accepting a part and gated committing the
 * record of it (outbound_parts + parts_sent). Telegram has no idempotency key, so a gated killed inside this
 * window sends that part again after the restart; everywhere else a kill costs nothing.
 *
 * Real telegraf against the local Bot API server (test/infra/telegram-api.ts), a real SQLite file and the
 * real delivery. The server stamps each message when it accepts it; delivery's debug line after the commit
 * stamps the record. Both clocks are this process's `performance.now()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { TelegramChannel } from '../channels/telegram/index.js';
import { createDelivery } from '../delivery/delivery.js';
import { openDatabase } from '../store/db.js';
import { insertOutbound } from '../store/messages.js';
import { TelegramApiServer } from '../test/infra/telegram-api.js';

/** What the window scenario reports. */
export interface WindowResult {
  parts: number;
  /** Accept → commit, in ms. */
  windowP50: number;
  windowP99: number;
  windowMax: number;
  /** Mean time per delivered part (send + record), ms. */
  perPartMs: number;
  /** Share of delivery time spent inside a window: the chance a kill during delivery lands in one. */
  exposure: number;
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/** Delivers `n` one-part replies to one chat and measures each part's window. */
export async function benchTelegramWindow(n: number): Promise<WindowResult> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-window-'));
  const api = await TelegramApiServer.start();
  const chat = { id: -777, type: 'group' as const, title: 'bench' };
  api.addChat(chat);
  const db = openDatabase(join(dir, 'gated.db'));
  const committedAt = new Map<number, number>();
  // The debug line 'part delivered' is written right after the part's transaction committed.
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const at = performance.now();
      const line = JSON.parse(chunk.toString('utf8')) as { msg?: string; row?: number };
      if (line.msg === 'part delivered' && line.row !== undefined) committedAt.set(line.row, at);
      cb();
    },
  });
  const log = pino({ level: 'debug', base: undefined }, sink);
  const channel = new TelegramChannel({
    token: api.token,
    apiRoot: api.url,
    db,
    log: pino({ level: 'silent' }),
  });
  const ids = new Map<string, number>();
  for (let i = 0; i < n; i += 1) {
    const text = `reply ${i}`;
    ids.set(text, insertOutbound(db, { chat_jid: `telegram:${chat.id}`, content: text, kind: 'reply' }));
  }
  const delivery = createDelivery({ db, channels: [channel], log, pollMs: 0 });
  const t0 = performance.now();
  delivery.start();
  await delivery.idle();
  const wall = performance.now() - t0;
  await delivery.stop();
  const windows: number[] = [];
  api.sent.forEach((m, i) => {
    const row = ids.get(m.text);
    const committed = row === undefined ? undefined : committedAt.get(row);
    if (committed !== undefined) windows.push(committed - api.acceptedAt[i]!);
  });
  db.close();
  await api.close();
  rmSync(dir, { recursive: true, force: true });
  if (windows.length !== n) throw new Error(`measured ${windows.length} of ${n} parts`);
  const sorted = [...windows].sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    parts: n,
    windowP50: round(pct(sorted, 50)),
    windowP99: round(pct(sorted, 99)),
    windowMax: round(sorted.at(-1) ?? 0),
    perPartMs: round(wall / n),
    exposure: round(windows.reduce((a, b) => a + b, 0) / wall),
  };
}
