/**
 * Drafts of a steered turn on Telegram (real telegraf against the local Bot API, the Claude agent against the
 * local Messages API): after `/stop` the draft is removed and no throttled edit follows, and the next turn's
 * draft is a new message; after `/interrupt` the interrupted turn's draft becomes its final text and the
 * next turn is answered in a message of its own.
 */
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import { until } from '../helpers/process.js';
import { useClaudeSuite, type ClaudeChat } from './claude-support.js';

const chat: Chat.PrivateChat = { id: 779, type: 'private', first_name: 'Ada' };
const ada: User = { id: 43, is_bot: false, first_name: 'Ada' };

const suite = useClaudeSuite({ telegram: [chat] });

const start = (): Promise<ClaudeChat> => suite.startTelegram({ GATED_STREAM_CHANNELS: 'telegram' });

/** The draft message of a long turn, once it was edited at least twice (it streams). */
async function streamingDraft(): Promise<number> {
  const { tg } = suite;
  const first = await until(() => tg.sent.find((m) => m.text.startsWith('line 0001')), 60_000, 'a draft');
  await until(() => tg.edits.filter((e) => e.message_id === first.message_id).length >= 2, 20_000, 'edits');
  return first.message_id;
}

test(
  '/stop: the draft is removed, no edit after "stopped", the next turn drafts in a new message',
  { timeout: 120_000 },
  async () => {
    const { tg } = suite;
    const c = await start();
    tg.message({ chat, from: ada, text: 'SLOW 40' });
    const draft = await streamingDraft();
    tg.message({ chat, from: ada, text: '/stop' });
    await until(() => tg.sent.find((m) => m.text === 'stopped claude'), 20_000, 'the /stop answer');
    await until(() => tg.deleted.some((d) => d.message_id === draft), 10_000, 'the draft removed');
    const edits = tg.edits.length;
    // The draft throttle is 1 s: an edit planned before the stop would land within it.
    await new Promise((r) => setTimeout(r, 2500));
    expect(tg.edits.length).toBe(edits);
    expect(c.gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);

    tg.message({ chat, from: ada, text: 'SAY after the stop' });
    const answer = await until(() => tg.sent.find((m) => m.text === 'after the stop'), 60_000, 'the answer');
    expect(answer.message_id).not.toBe(draft);
    expect(tg.edits.slice(edits).every((e) => e.message_id !== draft)).toBe(true);
  },
);

test(
  '/interrupt: the interrupted draft becomes its final text; the next turn is a message of its own',
  { timeout: 120_000 },
  async () => {
    const { tg } = suite;
    const chatOf = await start();
    tg.message({ chat, from: ada, text: 'SLOW 40' });
    const draft = await streamingDraft();
    tg.message({ chat, from: ada, text: '/interrupt better idea' });
    const better = await until(
      () =>
        tg.sent.find((m) => m.text === 'echo: better idea') ??
        tg.edits.find((e) => e.text === 'echo: better idea'),
      60_000,
      'the new turn answered',
    );
    expect(better.message_id).not.toBe(draft);
    const cut = chatOf.gated.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply' ORDER BY id LIMIT 1`)
      .pluck()
      .get() as string;
    expect(cut).toMatch(/^line 0001 of the long answer/);
    // The reply says it was cut: the mark on a line of its own after the text the turn had.
    expect(cut).toMatch(/long answer\n\n…\(interrupted\)$/);
    await chatOf.gated.delivery.idle();
    // The draft ended as the interrupted turn's answer: its last edit is that text, and nothing came after.
    const onDraft = tg.edits.filter((e) => e.message_id === draft);
    expect(onDraft.at(-1)!.text).toBe(cut.trim());
    expect(onDraft.at(-1)!.text.endsWith('…(interrupted)')).toBe(true);
    await new Promise((r) => setTimeout(r, 2000));
    expect(tg.edits.filter((e) => e.message_id === draft)).toHaveLength(onDraft.length);
    expect(chatOf.gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
  },
);
