/**
 * Slack and GitHub unreachable when gated starts: the whole gateway (startE2eGated, process runtime, example
 * agent) is started before the local Slack and GitHub servers exist on the ports it was given. Both
 * channels keep trying in the background and, once their servers are up, receive and answer.
 */
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { freePort } from '../infra/atproto/proc.js';
import { GithubApiServer, type GithubUser } from '../infra/github-api.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { startE2eGated } from './e2e.js';

let gated: Gated | undefined;

const SECRET = 'late-webhook-secret';
const ada: GithubUser = { login: 'ada', id: 42, type: 'User' };
const ISSUE = { owner: 'acme', repo: 'widgets', number: 3 };

test('Slack and GitHub down at start come up in the background and answer', { timeout: 60_000 }, async () => {
  const [slackPort, githubPort] = [await freePort(), await freePort()];
  const slackUrl = `http://127.0.0.1:${slackPort}/api/`;
  const githubUrl = `http://127.0.0.1:${githubPort}`;
  // The tokens the local servers will take (fixed in test/infra).
  const tokens = { slackBot: 'xoxb-test-bot-token', slackApp: 'xapp-test-app-token' };
  const settings = {
    SLACK_BOT_TOKEN: tokens.slackBot,
    SLACK_APP_TOKEN: tokens.slackApp,
    SLACK_API_URL: slackUrl,
    GITHUB_TOKEN: 'ghp_testtoken0000000000000000000000000',
    GITHUB_WEBHOOK_SECRET: SECRET,
    GITHUB_API_URL: githubUrl,
  };
  const started = Date.now();
  gated = await startE2eGated(settings, {
    groups: [['late/all', 'Late platforms']],
    routes: [[10, 'verb=mention', 'late/all']],
  });
  // The start did not wait for the platforms, and both channels are kept (not left out until a restart).
  expect(Date.now() - started).toBeLessThan(10_000);
  expect(gated.channels.map((c) => c.platform)).toEqual(expect.arrayContaining(['slack', 'github']));
  const github = gated.channels.find((c) => c.platform === 'github')!;
  const hook = github.webhook!;

  const gh = closedAfterGateds(await GithubApiServer.start(githubPort));
  const comment = gh.userComment(ISSUE, ada, '@gated-bot are you there?');
  // Until the channel knows who it is, a delivery is refused with 503 (to be delivered again).
  await until(
    async () => (await gh.deliver(hook, 'issue_comment', comment, SECRET, 'late-1')) === 204,
    20_000,
    'the github channel connected',
  );

  const slack = closedAfterGateds(await SlackApiServer.start(slackPort));
  await slack.waitConnected(20_000);
  const mention = slack.messageEvent({
    channel: slack.channelId,
    user: 'U0ADA001',
    text: `<@${slack.botUserId}> hi`,
  });
  await slack.waitAck(slack.pushEvent(slack.callback(mention)));

  await until(() => slack.posted.length > 0, 20_000, 'the slack answer');
  await until(() => gh.comments.some((c) => c.user.id === gh.bot.id), 20_000, 'the github answer');
  expect(slack.posted.map((p) => [p.text, p.thread_ts])).toEqual([['echo: hi', mention.ts]]);
  const answers = gh.comments.filter((c) => c.user.id === gh.bot.id);
  expect(answers.map((c) => c.body.split('\n')[0])).toEqual(['echo: are you there?']);
});
