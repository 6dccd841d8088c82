/**
 * An agent's `react` on Slack and on GitHub, end to end: the whole gateway (process runtime, the example
 * agent's `!react <emoji>`), the real Slack clients over Socket Mode and Octokit against the local Slack and
 * GitHub servers. Both platforms' rows in core/platforms.ts say they have reactions, so the action is applied
 * and the reaction lands on the message the turn answers (Telegram and Discord: test/gated/actions.test.ts).
 */
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { GithubApiServer, type GithubUser } from '../infra/github-api.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { startE2eGated } from './e2e.js';

const SECRET = 'react-webhook-secret';
const ada: GithubUser = { login: 'ada', id: 42, type: 'User' };
const ISSUE = { owner: 'acme', repo: 'widgets', number: 11 };

/** The actions the agent asked for, as stored: applied, or refused with the note's reason. */
const actions = (g: Gated) =>
  g.db.prepare(`SELECT type, status, chat_jid FROM actions ORDER BY id`).all() as Array<
    Record<string, string>
  >;

test('react on Slack: reactions.add on the mention the turn answers', async () => {
  const api = closedAfterGateds(await SlackApiServer.start());
  const g = await startE2eGated(
    { SLACK_BOT_TOKEN: api.botToken, SLACK_APP_TOKEN: api.appToken, SLACK_API_URL: api.apiUrl },
    { groups: [['sl/team', 'Slack team']], routes: [[0, 'platform=slack', 'sl/team']] },
  );
  await api.waitConnected();
  const mention = api.messageEvent({
    channel: api.channelId,
    user: 'U0ADA001',
    text: `<@${api.botUserId}> !react thumbsup`,
  });
  await api.waitAck(api.pushEvent(api.callback(mention)));
  const added = () => api.calls.filter((c) => c.method === 'reactions.add');
  await until(() => added().length > 0, 20_000, 'a slack reaction');
  expect(added().map((c) => c.args)).toEqual([
    expect.objectContaining({ channel: api.channelId, timestamp: mention.ts, name: 'thumbsup' }),
  ]);
  expect(actions(g)).toEqual([{ type: 'react', status: 'applied', chat_jid: `slack:${api.channelId}` }]);
  await until(
    () => g.db.prepare(`SELECT delivery FROM messages WHERE kind = 'reaction'`).pluck().get() === 'sent',
    20_000,
    'the reaction row recorded as sent',
  );
});

test('react on GitHub: a reaction on the comment the turn answers', async () => {
  const gh = closedAfterGateds(await GithubApiServer.start());
  const g = await startE2eGated(
    { GITHUB_TOKEN: gh.token, GITHUB_WEBHOOK_SECRET: SECRET, GITHUB_API_URL: gh.url },
    { groups: [['gh/triage', 'Triage']], routes: [[0, 'platform=github', 'gh/triage']] },
  );
  const hook = g.channels.find((c) => c.platform === 'github')?.webhook;
  expect(hook).toBeDefined();
  const comment = gh.userComment(ISSUE, ada, `@${gh.bot.login} !react 🚀`);
  const stored = gh.comments.at(-1)!;
  expect(await gh.deliver(hook!, 'issue_comment', comment, SECRET)).toBe(204);
  await until(() => stored.reactions.length > 0, 20_000, 'a github reaction');
  expect(stored.reactions).toEqual(['rocket']);
  // Only the user's comment got it: the bot posted no comment of its own for a reaction.
  expect(gh.comments.filter((c) => c.reactions.length > 0)).toEqual([stored]);
  expect(actions(g)).toEqual([
    { type: 'react', status: 'applied', chat_jid: expect.stringMatching(/^github:acme\/widgets#11/) },
  ]);
});
