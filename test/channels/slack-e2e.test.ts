/**
 * Slack end to end with the whole gateway (startGated with the process runtime and the example agent) and
 * the real Slack clients over Socket Mode against the local Slack server: the configuration starts the
 * channel, a mention is answered in a thread under it, in mrkdwn.
 */
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { startE2eGated } from './e2e.js';

let api: SlackApiServer | undefined;
let gated: Gated | undefined;

test('a mention in a Slack channel reaches the example agent and is answered in its thread', async () => {
  api = closedAfterGateds(await SlackApiServer.start());
  gated = await startE2eGated(
    { SLACK_BOT_TOKEN: api.botToken, SLACK_APP_TOKEN: api.appToken, SLACK_API_URL: api.apiUrl },
    {
      groups: [['sl/mentions', 'Slack mentions']],
      routes: [[10, 'platform=slack verb=mention', 'sl/mentions']],
    },
  );
  expect(gated.channels.map((c) => c.platform)).toContain('slack');
  await api.waitConnected();

  const push = (ev: Record<string, unknown>) => api!.waitAck(api!.pushEvent(api!.callback(ev)));
  await push(api.messageEvent({ channel: api.channelId, user: 'U0ADA001', text: 'not for the bot' }));
  const mention = api.messageEvent({
    channel: api.channelId,
    user: 'U0ADA001',
    text: `<@${api.botUserId}> hello **there**`,
  });
  await push(mention);
  await until(() => api!.posted.length > 0, 15_000, 'the answer');
  expect(api.posted.map((p) => ({ text: p.text, thread_ts: p.thread_ts }))).toEqual([
    { text: 'echo: hello *there*', thread_ts: mention.ts },
  ]);
  const states = gated.db
    .prepare(`SELECT content, verb, state FROM messages WHERE is_from_me = 0 ORDER BY id`)
    .all();
  expect(states).toEqual([
    { content: 'not for the bot', verb: 'message', state: 'unrouted' },
    { content: 'hello **there**', verb: 'mention', state: 'done' },
  ]);
});
