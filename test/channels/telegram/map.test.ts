import type { Update } from 'telegraf/types';
import { describe, expect, it } from 'vitest';
import { messageIdOf, updateToInbound } from '../../../channels/telegram/map.js';

const bot = { id: 99, username: 'gated_bot' };
const chat = { id: -100, type: 'supergroup', title: 'G' };
const ada = { id: 1, is_bot: false, first_name: 'Ada' };
const update = (u: Record<string, unknown>, update_id = 1) => ({ update_id, ...u }) as unknown as Update;
const message = (fields: Record<string, unknown>) => ({
  message_id: 7,
  date: 1_700_000_000,
  chat,
  from: ada,
  ...fields,
});

describe('updateToInbound', () => {
  it('takes a text_mention of the bot as a mention and keeps the platform time', () => {
    const text = 'Gated, please';
    const u = update({
      message: message({
        text,
        entities: [{ type: 'text_mention', offset: 0, length: 5, user: { id: 99 } }],
      }),
    });
    expect(updateToInbound(u, bot)).toMatchObject({
      verb: 'mention',
      content: text,
      timestamp: '2023-11-14T22:13:20.000Z',
    });
  });

  it('does not take a mention of someone else, or one inside a command, as a mention', () => {
    const other = update({ message: message({ text: 'ask @gated_bot_fan', entities: [] }) });
    const cmd = update({ message: message({ text: '/help@gated_bot' }) });
    expect(updateToInbound(other, bot)?.verb).toBe('message');
    expect(updateToInbound(cmd, bot)).toMatchObject({ verb: 'message', content: '/help@gated_bot' });
  });

  it('labels media, keeps captions, and speaks for anonymous admins as their chat', () => {
    const photo = update({ message: message({ photo: [{ file_id: 'x' }], caption: 'look' }) });
    expect(updateToInbound(photo, bot)?.content).toBe('[photo] look');
    const anon = update({
      message: message({ text: 'hi', sender_chat: { id: -100, type: 'supergroup', title: 'G' } }),
    });
    expect(updateToInbound(anon, bot)).toMatchObject({ sender: '-100', sender_name: 'G' });
  });

  it('ignores service messages and taken-back reactions', () => {
    expect(updateToInbound(update({ message: message({ pinned_message: {} }) }), bot)).toBeNull();
    const unreact = update({
      message_reaction: {
        chat,
        message_id: 7,
        user: ada,
        date: 1,
        old_reaction: [{ type: 'emoji', emoji: '👍' }],
        new_reaction: [],
      },
    });
    expect(updateToInbound(unreact, bot)).toBeNull();
    expect(updateToInbound(update({ poll: { id: '1' } }), bot)).toBeNull();
  });

  it('gives every edit its own id, and the same update the same id', () => {
    const edit = (id: number) => update({ edited_message: message({ text: 'v2', edit_date: 5 }) }, id);
    const a = updateToInbound(edit(10), bot)!.platform_msg_id;
    expect(updateToInbound(edit(10), bot)!.platform_msg_id).toBe(a);
    expect(updateToInbound(edit(11), bot)!.platform_msg_id).not.toBe(a);
    expect(messageIdOf(a ?? null)).toBe(7);
    expect(messageIdOf('abc')).toBeUndefined();
    expect(messageIdOf(null)).toBeUndefined();
  });
});
