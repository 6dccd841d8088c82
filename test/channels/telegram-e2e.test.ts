/**
 * Telegram end to end with the whole gateway (startGated: poll loop, layers, queue, process runtime with
 * the example agent, delivery) and real telegraf against the local Bot API server.
 */
import type { Chat, User } from 'telegraf/types';
import { beforeEach, expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { startE2eGated } from './e2e.js';

const group: Chat.SupergroupChat = { id: -1009876543210, type: 'supergroup', title: 'Team' };
const forum = {
  id: -1005555555555,
  type: 'supergroup',
  title: 'Help desk',
  is_forum: true,
} as Chat.SupergroupChat;
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let api: TelegramApiServer;
let gated: Gated;

beforeEach(async () => {
  api = closedAfterGateds(await TelegramApiServer.start());
  gated = await startE2eGated(
    { TELEGRAM_BOT_TOKEN: api.token, TELEGRAM_API_ROOT: api.url },
    {
      groups: [
        ['tg/mentions', 'Mentions'],
        ['tg/helpdesk', 'Help desk'],
      ],
      routes: [
        [0, `room=${forum.id}`, 'tg/helpdesk'],
        [10, 'platform=telegram verb=mention', 'tg/mentions'],
      ],
    },
  );
  expect(gated.channels.map((c) => c.platform)).toContain('telegram');
});

test('/ping@bot in a group is answered by the gateway', async () => {
  const cmd = '/ping@gated_test_bot';
  const msg = api.message({
    chat: group,
    from: ada,
    text: cmd,
    entities: [{ type: 'bot_command', offset: 0, length: cmd.length }],
  });
  const [sent] = await api.waitForSent(1);
  expect(sent!.chat_id).toBe(group.id);
  expect(sent!.text.split('\n')[0]).toBe('pong');
  expect(sent!.reply_to_message_id).toBe(msg.message_id);
});

test('@bot hello reaches the example agent and the answer replies to that message', async () => {
  const msg = api.message({
    chat: group,
    from: ada,
    text: '@gated_test_bot hello',
    entities: [{ type: 'mention', offset: 0, length: 15 }],
  });
  const [sent] = await api.waitForSent(1);
  expect(sent).toMatchObject({ chat_id: group.id, text: 'echo: hello', reply_to_message_id: msg.message_id });
  const row = gated.db
    .prepare(`SELECT group_folder, verb FROM messages WHERE platform_msg_id = ?`)
    .get(String(msg.message_id));
  expect(row).toEqual({ group_folder: 'tg/mentions', verb: 'mention' });
});

test('a forum-topic message is answered in its topic', async () => {
  api.serviceMessage(forum, ada, { group_chat_created: true });
  const topic = api.serviceMessage(forum, ada, { forum_topic_created: { name: 'Printers', icon_color: 1 } });
  const msg = api.message({ chat: forum, from: ada, text: 'the printer is on fire', thread: topic });
  const [sent] = await api.waitForSent(1);
  expect(sent).toMatchObject({
    chat_id: forum.id,
    text: 'echo: the printer is on fire',
    message_thread_id: topic,
    reply_to_message_id: msg.message_id,
  });
});
