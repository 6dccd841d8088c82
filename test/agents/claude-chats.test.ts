/**
 * Two chats routed to one group (docs/QUEUE.md, "Another chat of the same key"): the web chat and a Telegram chat (real telegraf
 * against the local Bot API) both reach the Claude agent's group, one session key. With a 30 s idle timeout,
 * a Telegram message that arrives while the web chat's run sits idle is answered at once (the idle run is
 * closed for it and the next run resumes the same session), not after the idle timeout.
 */
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import { until } from '../helpers/process.js';
import { requestFor, useClaudeSuite } from './claude-support.js';

const tgChat: Chat.PrivateChat = { id: 881, type: 'private', first_name: 'Bea' };
const bea: User = { id: 44, is_bot: false, first_name: 'Bea' };
const IDLE_MS = 30_000;

const suite = useClaudeSuite({ telegram: [tgChat] });

test(
  "a second chat of the group is not kept waiting by the first chat's idle run",
  { timeout: 120_000 },
  async () => {
    const { api, tg } = suite;
    const c = await suite.startTelegram({ GATED_IDLE_TIMEOUT_MS: String(IDLE_MS) });
    const web = c.send('hello from the web');
    expect(await c.reply(web)).toBe('echo: hello from the web');
    const first = c.runs();
    expect(first).toHaveLength(1);
    expect(first[0]!.result).toBeNull(); // the web chat's run is alive, idle, for 30 s more

    const sentAt = Date.now();
    tg.message({ chat: tgChat, from: bea, text: 'hello from telegram' });
    const answer = await until(
      () =>
        tg.sent.find((m) => m.text === 'echo: hello from telegram') ??
        tg.edits.find((e) => e.text === 'echo: hello from telegram'),
      IDLE_MS,
      'the Telegram answer',
    );
    const ms = Date.now() - sentAt;
    // Well under the idle timeout: the time of one agent start and one answer.
    expect(ms).toBeLessThan(10_000);
    expect(answer.chat_id).toBe(tgChat.id);
    const runs = c.runs();
    expect(runs).toHaveLength(2);
    expect(runs[0]!.result).toBe('ok');
    // One session key, one session: the Telegram turn's request carries the web chat's earlier turn.
    const req = requestFor(api, 'hello from telegram');
    expect(api.seenUserWords(req).join('\n')).toContain('hello from the web');
    // And back: the web chat, now waiting on the Telegram chat's idle run, is answered as quickly.
    const backAt = Date.now();
    const again = c.send('back on the web');
    expect(await c.reply(again, IDLE_MS)).toBe('echo: back on the web');
    expect(Date.now() - backAt).toBeLessThan(10_000);
    expect(c.runs()).toHaveLength(3);
  },
);
