import type { Chat } from 'telegraf/types';
import { afterEach, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createSignals } from '../../core/signals.js';
import { TelegramChannel } from '../../channels/telegram/index.js';
import { createTypingKeeper } from '../../delivery/typing.js';
import { freshDb } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { TelegramApiServer } from '../infra/telegram-api.js';

const chat: Chat.PrivateChat = { id: 77, type: 'private', first_name: 'Ada' };
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

it('keeps Telegram typing renewed while the agent works and stops once it answered', async () => {
  const api = await TelegramApiServer.start();
  cleanups.push(() => api.close());
  const { db } = freshDb();
  const channel = new TelegramChannel({ token: api.token, apiRoot: api.url, db, log: silentLogger() });
  await channel.start(() => null);
  cleanups.push(() => channel.stop());
  const typing = createTypingKeeper({ channels: [channel], log: silentLogger(), renewMs: 40 });
  cleanups.push(async () => typing.stop());
  const jid = `telegram:${chat.id}`;

  typing.set(jid, true);
  typing.set(jid, true); // a follow-up while working: still one indicator
  await until(() => api.count('sendChatAction') >= 4, 5000, 'renewed typing');
  typing.set(jid, false);
  const after = api.count('sendChatAction');
  // Several renewal periods later nothing more was sent.
  await new Promise((r) => setTimeout(r, 200));
  expect(api.count('sendChatAction')).toBe(after);
  expect(
    api.calls.filter((c) => c.method === 'sendChatAction').every((c) => c.payload.action === 'typing'),
  ).toBe(true);
  // A platform without a started channel is skipped, not an error.
  expect(() => typing.set('discord:1', true)).not.toThrow();
});

it('follows the working signal until stopped', async () => {
  const api = await TelegramApiServer.start();
  cleanups.push(() => api.close());
  const { db } = freshDb();
  const channel = new TelegramChannel({ token: api.token, apiRoot: api.url, db, log: silentLogger() });
  await channel.start(() => null);
  cleanups.push(() => channel.stop());
  const signals = createSignals();
  const typing = createTypingKeeper({ channels: [channel], log: silentLogger(), signals, renewMs: 60_000 });
  const chatJid = `telegram:${chat.id}`;
  signals.working.fire({ chatJid, on: true });
  await until(() => api.count('sendChatAction') === 1, 5000, 'typing shown');
  signals.working.fire({ chatJid, on: false });
  typing.stop();
  // Stopped: the signal no longer reaches it.
  signals.working.fire({ chatJid, on: true });
  expect(api.count('sendChatAction')).toBe(1);
});
