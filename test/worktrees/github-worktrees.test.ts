/**
 * A GitHub group bound to its repository from the webhook (GITHUB_WORKTREES=1): `gated run` as a child
 * process with the GitHub channel against the local GitHub server, an agent that commits in its folder. An
 * issue's comment runs in the issue's worktree on branch issue-N, a pull request's on the pull request's
 * head; closing the issue removes its worktree, keeps its unpushed branch and says so in the issue.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedRun, gatedUp, stderrOf, until } from '../helpers/process.js';
import { GithubApiServer, type GithubUser } from '../infra/github-api.js';
import { e2eConfig } from '../channels/support.js';
import { makeRepo, plainGit } from './helpers.js';

const SECRET = 'wt-webhook-secret';
const ada: GithubUser = { login: 'ada', id: 42, type: 'User' };
const agent = packageFile('test', 'worktrees', 'agents', 'git-agent.mjs');
const urlOf = (child: Parameters<typeof stderrOf>[0]) => /web chat at (\S+)/.exec(stderrOf(child))![1]!;

test(
  "an issue and a pull request each in its own worktree; the issue's close removes its worktree and keeps its unpushed branch",
  { timeout: 120_000 },
  async () => {
    const api = await GithubApiServer.start();
    const dir = tempDir('gated-gh-wt-');
    const upstream = makeRepo(join(dir, 'upstream'));
    // The pull request's head: a commit GitHub serves as refs/pull/9/head, on no branch.
    plainGit(upstream, 'checkout', '-q', '-b', 'feature');
    plainGit(upstream, 'commit', '-q', '--allow-empty', '-m', 'the pull request');
    plainGit(upstream, 'update-ref', 'refs/pull/9/head', 'HEAD');
    plainGit(upstream, 'checkout', '-q', 'main');
    plainGit(upstream, 'branch', '-q', '-D', 'feature');
    api.cloneUrls.set('acme/widgets', `file://${upstream}`);
    const cfg = e2eConfig(
      dir,
      {},
      { groups: [['gh/code', 'Code']], routes: [[0, 'platform=github', 'gh/code']] },
    );
    const child = await gatedUp(
      gatedRun({
        GATED_DB: cfg.db,
        GATED_GROUPS_DIR: cfg.groupsDir,
        GATED_POLL_MS: '50',
        GATED_HTTP_PORT: '0',
        GATED_RUNTIME: 'process',
        GATED_PROCESS_USER: 'root',
        GATED_AGENT_CMD: `node "${agent}"`,
        GATED_IDLE_TIMEOUT_MS: '300',
        GATED_LOG_LEVEL: 'warn',
        GITHUB_TOKEN: api.token,
        GITHUB_WEBHOOK_SECRET: SECRET,
        GITHUB_API_URL: api.url,
        GITHUB_WORKTREES: '1',
      }),
    );
    const db = new Database(cfg.db, { readonly: true });
    try {
      const hook = `${urlOf(child)}/hooks/github`;
      const issue = { owner: 'acme', repo: 'widgets', number: 7 };
      const pull = { owner: 'acme', repo: 'widgets', number: 9, pull: true };
      const send = (event: string, payload: Record<string, unknown>) =>
        api.deliver(hook, event, payload, SECRET);
      await until(
        async () => (await api.deliver(hook, 'ping', {}, 'wrong')) !== 503,
        20_000,
        'the github channel started',
      );
      expect(await send('issue_comment', api.userComment(issue, ada, '@gated-bot fix it'))).toBe(204);
      expect(await send('issue_comment', api.userComment(pull, ada, '@gated-bot review it'))).toBe(204);
      // A comment's body without the marker gated adds to find it again after a crash.
      const bodies = (n: number) => api.shown('acme', 'widgets', n).map((c) => c.body.split('\n\n<!--')[0]!);
      const answer = (n: number) => bodies(n)[0];
      await until(() => answer(7) !== undefined && answer(9) !== undefined, 60_000, 'both answers');
      const a7 = JSON.parse(answer(7)!) as { branch: string; started: string; seen: string };
      const a9 = JSON.parse(answer(9)!) as { branch: string; started: string };
      expect(a7).toMatchObject({ branch: 'issue-7', started: 'base', seen: 'changed by issue-7\n' });
      expect(a9).toMatchObject({ branch: 'pr-9', started: 'the pull request' });
      const clone = join(dir, 'repos', 'gh+code', 'repo.git');
      expect(plainGit(clone, 'log', '--format=%s', 'issue-7')).toBe('change of issue-7\nbase');
      expect(plainGit(clone, 'log', '--format=%s', 'pr-9')).toBe('change of pr-9\nthe pull request\nbase');
      const binding = db.prepare('SELECT source, cloned FROM group_repos').get();
      expect(binding).toEqual({ source: `file://${upstream}`, cloned: 1 });

      // The issue is closed: its worktree goes, its branch (a commit pushed nowhere) stays, the issue is told.
      const closed = api.closed(issue, ada);
      expect(await send(closed.event, closed.payload)).toBe(204);
      await until(() => api.shown('acme', 'widgets', 7).length === 2, 60_000, 'the note in the issue');
      expect(bodies(7)[1]).toBe(
        'The worktree of #issue-7 was removed (issue #7 closed). Its branch issue-7 is kept with 1 commit not pushed anywhere.',
      );
      expect(existsSync(join(dir, 'repos', 'gh+code', 'issue-7'))).toBe(false);
      expect(plainGit(clone, 'log', '--format=%s', '-1', 'issue-7')).toBe('change of issue-7');
      expect(existsSync(join(dir, 'repos', 'gh+code', 'pr-9'))).toBe(true);
      expect(db.prepare('SELECT topic FROM worktrees').pluck().all()).toEqual(['pr-9']);

      // /new in the pull request: its worktree goes too; the pull request's own commit is on the remote,
      // the agent's is not.
      expect(await send('issue_comment', api.userComment(pull, ada, '@gated-bot /new'))).toBe(204);
      await until(() => bodies(9).length === 3, 60_000, 'the /new answer and the note');
      expect(bodies(9).slice(1).sort()).toEqual([
        'The worktree of #pr-9 was removed (/new). Its branch pr-9 is kept with 1 commit not pushed anywhere.',
        'new session for gh/code#pr-9; its worktree is removed, its unpushed work kept',
      ]);
      expect(existsSync(join(dir, 'repos', 'gh+code', 'pr-9'))).toBe(false);
      expect(plainGit(clone, 'log', '--format=%s', '-1', 'pr-9')).toBe('change of pr-9');
    } finally {
      db.close();
      child.kill('SIGTERM');
      await exited(child);
      await api.close();
    }
  },
);
