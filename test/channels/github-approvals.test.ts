/**
 * Tool approvals on a platform without buttons or edits of the question (docs/APPROVALS.md): GitHub, with
 * the whole gateway, the example agent's `!tool` mode and the local GitHub API. The question is a comment
 * naming `/approve CODE` and `/reject CODE`; a member who is not an approver is refused; the owner's
 * `/approve` comment decides, the tool runs once, and a follow-up comment says who decided.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { groupDirOf } from '../../core/group-dir.js';
import { upsertMember } from '../../store/access.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { GithubApiServer, type GithubUser } from '../infra/github-api.js';
import { startE2eGated } from './e2e.js';

const SECRET = 'approvals-webhook-secret';
const olga: GithubUser = { login: 'olga', id: 61, type: 'User' };
const bob: GithubUser = { login: 'bob', id: 62, type: 'User' };
const ISSUE = { owner: 'acme', repo: 'widgets', number: 9 };

test('GitHub: the question is a comment; the decision is followed up by a comment that says who decided', async () => {
  const gh = closedAfterGateds(await GithubApiServer.start());
  const g = await startE2eGated(
    { GITHUB_TOKEN: gh.token, GITHUB_WEBHOOK_SECRET: SECRET, GITHUB_API_URL: gh.url },
    { groups: [['gh/ops', 'Ops']], routes: [[0, 'platform=github', 'gh/ops']] },
  );
  const hook = g.channels.find((c) => c.platform === 'github')?.webhook;
  expect(hook).toBeDefined();
  upsertMember(g.db, 'gh/ops', `github:${olga.id}`, 'owner');
  upsertMember(g.db, 'gh/ops', `github:${bob.id}`, 'member');
  g.db
    .prepare(`INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('gh/ops', 1, 'Bash', 'ask')`)
    .run();
  const say = (who: GithubUser, body: string) =>
    gh.deliver(hook!, 'issue_comment', gh.userComment(ISSUE, who, `@${gh.bot.login} ${body}`), SECRET);
  const shown = () => gh.shown(ISSUE.owner, ISSUE.repo, ISSUE.number).map((c) => c.body);
  const find = (text: string) => shown().filter((b) => b.includes(text));

  expect(await say(bob, '!tool Bash make deploy')).toBe(204);
  await until(() => find('The agent wants to run Bash').length === 1, 20_000, 'the question');
  const question = find('The agent wants to run Bash')[0]!;
  const code = /\/approve ([A-Z0-9]{5})/.exec(question)![1]!;
  expect(question).toContain(`/reject ${code}`);

  expect(await say(bob, `/approve ${code}`)).toBe(204);
  await until(() => find('you may not approve').length === 1, 20_000, 'the refusal');
  expect(await say(olga, `/approve ${code}`)).toBe(204);
  await until(() => find('tool Bash ran:').length === 1, 30_000, 'the answer after approval');
  await until(
    () => find(`Bash (${code}): approved by github:${olga.id}`).length === 1,
    20_000,
    'the follow-up',
  );

  // The question was not edited (the platform has no buttons): it still reads as asked; nothing twice.
  expect(find('The agent wants to run Bash')).toEqual([question]);
  expect(find(`(${code}): approved`)).toHaveLength(1);
  const runs = readFileSync(join(groupDirOf(g.config.groupsDir, 'gh/ops'), '.tool-runs.log'), 'utf8');
  expect(runs.trim().split('\n')).toEqual(['Bash {"command":"make deploy"}']);
  expect(g.db.prepare('SELECT state, decided_by, platform_id FROM tool_approvals').get()).toEqual({
    state: 'approved',
    decided_by: `github:${olga.id}`,
    platform_id: null,
  });
}, 60_000);
