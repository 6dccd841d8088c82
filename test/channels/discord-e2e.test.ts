/**
 * Discord end to end with the whole gateway (startGated with the process runtime and the example agent)
 * and real discord.js against the local Discord REST + gateway server.
 */
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { startE2eGated } from './e2e.js';

let api: DiscordApiServer | undefined;
let gated: Gated | undefined;

test('a mention in a guild channel reaches the example agent and is answered as a reply', async () => {
  api = closedAfterGateds(await DiscordApiServer.start());
  gated = await startE2eGated(
    { DISCORD_BOT_TOKEN: api.token, DISCORD_API_ROOT: api.apiRoot },
    {
      groups: [['dc/mentions', 'Discord mentions']],
      routes: [[10, 'platform=discord verb=mention', 'dc/mentions']],
    },
  );
  expect(gated.channels.map((c) => c.platform)).toContain('discord');

  const user = { id: '700000000000000042', username: 'ada', global_name: 'Ada' };
  api.push({ channelId: api.textChannelId, author: user, content: 'not for the bot' });
  const msg = api.push({
    channelId: api.textChannelId,
    author: user,
    content: `<@${api.bot.id}> hello`,
    mentions: [api.bot],
  });
  const [reply, ...more] = await api.waitForPosted(1);
  expect(reply).toMatchObject({
    channel_id: api.textChannelId,
    content: 'echo: hello',
    message_reference: { message_id: msg.id },
  });
  expect(more).toEqual([]);
  const states = gated.db
    .prepare(`SELECT content, verb, state FROM messages WHERE is_from_me = 0 ORDER BY id`)
    .all();
  expect(states).toEqual([
    { content: 'not for the bot', verb: 'message', state: 'unrouted' },
    { content: 'hello', verb: 'mention', state: 'done' },
  ]);
});
