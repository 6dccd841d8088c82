/**
 * Drafts rendered, not raw Markdown, on Telegram (real telegraf against the local Bot API, the Claude agent
 * against the local Messages API): a Markdown answer streamed in small pieces is shown as HTML at every
 * draft, each draft valid by the strict checker of Telegram's HTML subset, and the chat's notification
 * preview (the first draft) is never "## …".
 */
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import { until } from '../helpers/process.js';
import { checkTelegramHtml } from '../infra/telegram-html.js';
import { useClaudeSuite } from './claude-support.js';

const chat: Chat.PrivateChat = { id: 912, type: 'private', first_name: 'Cy' };
const cy: User = { id: 45, is_bot: false, first_name: 'Cy' };

const suite = useClaudeSuite({ telegram: [chat] });

test(
  'a streamed Markdown answer: every draft is valid HTML and shows no raw markup',
  { timeout: 120_000 },
  async () => {
    const { tg } = suite;
    const c = await suite.startTelegram({ GATED_STREAM_CHANNELS: 'telegram' });
    tg.message({ chat, from: cy, text: 'MARKDOWN please' });
    const first = await until(() => tg.sent.find((m) => m.chat_id === chat.id), 60_000, 'the first draft');
    await until(
      () => tg.edits.some((e) => e.message_id === first.message_id && e.text.includes('That is <b>all</b>.')),
      60_000,
      'the answer',
    );
    await c.gated.delivery.idle();
    const shown = [
      first.text,
      ...tg.edits.filter((e) => e.message_id === first.message_id).map((e) => e.text),
    ];
    // Streamed over about 4 s with a draft a second: several drafts before the answer.
    expect(shown.length).toBeGreaterThanOrEqual(3);
    expect(first.parse_mode).toBe('HTML');
    expect(
      tg.edits.filter((e) => e.message_id === first.message_id).every((e) => e.parse_mode === 'HTML'),
    ).toBe(true);
    expect(tg.refusedHtml).toEqual([]);
    for (const text of shown) {
      expect(checkTelegramHtml(text), text).toBeNull();
      expect(text, text).not.toMatch(/\*\*|^#|```/m);
    }
    // The notification preview (the first draft) is the heading's words so far, bold, not its Markdown.
    expect(first.text).toMatch(/^<b>A/);
    // The table reads as one: a monospace block, columns aligned and the header ruled off.
    const final = shown.at(-1)!;
    expect(final).toContain(
      '<pre><code>name  | value\n------+------\nalpha |     1\nbeta  |    22</code></pre>',
    );
    expect(tg.sent.filter((m) => m.chat_id === chat.id)).toHaveLength(1);
  },
);
