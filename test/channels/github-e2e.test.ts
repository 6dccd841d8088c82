/**
 * GitHub end to end: `gated run` as a child process with the GitHub channel against the local GitHub server,
 * deliveries signed and POSTed to gated's real HTTP server at /hooks/github, the example agent answering.
 * gated is killed with SIGKILL after GitHub accepted the answer's comment and before delivery recorded it:
 * the restarted gated finds the comment by its marker and posts nothing twice.
 */
import Database from 'better-sqlite3';
import { expect, test } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { exited, gatedRun, gatedUp, stderrOf, until } from '../helpers/process.js';
import { GithubApiServer, type GithubUser } from '../infra/github-api.js';
import { e2eConfig } from './support.js';

const SECRET = 'e2e-webhook-secret';
const ada: GithubUser = { login: 'ada', id: 42, type: 'User' };
const ISSUE = { owner: 'acme', repo: 'widgets', number: 7 };

/** The URL a gated child serves its web chat at (and so /hooks/github). */
const urlOf = (child: Parameters<typeof stderrOf>[0]) => /web chat at (\S+)/.exec(stderrOf(child))![1]!;

test(
  'kill -9 between GitHub accepting the answer and its record: after restart the comment is not posted again',
  { timeout: 90_000 },
  async () => {
    const api = await GithubApiServer.start();
    try {
      const dir = tempDir('gated-gh-e2e-');
      const cfg = e2eConfig(
        dir,
        {},
        { groups: [['gh/triage', 'Triage']], routes: [[0, 'platform=github', 'gh/triage']] },
      );
      const env = {
        GATED_DB: cfg.db,
        GATED_GROUPS_DIR: cfg.groupsDir,
        GATED_POLL_MS: '50',
        GATED_HTTP_PORT: '0',
        GATED_RUNTIME: 'process',
        GATED_IDLE_TIMEOUT_MS: '300',
        GATED_LOG_LEVEL: 'warn',
        GITHUB_TOKEN: api.token,
        GITHUB_WEBHOOK_SECRET: SECRET,
        GITHUB_API_URL: api.url,
      };
      const first = await gatedUp(gatedRun(env));
      const hook = `${urlOf(first)}/hooks/github`;

      // A forged delivery is refused by the real server and stores nothing (503 until the channel started).
      const comment = api.userComment(ISSUE, ada, '@gated-bot how do I build this?');
      const forged = () => api.deliver(hook, 'issue_comment', comment, 'forged');
      await until(async () => (await forged()) !== 503, 20_000, 'the github channel started');
      expect(await forged()).toBe(401);
      // The create of the answer's comment is accepted by GitHub, and its answer never comes.
      api.failNext({ kind: 'hang' });
      expect(await api.deliver(hook, 'issue_comment', comment, SECRET, 'delivery-1')).toBe(204);
      await until(() => api.comments.some((c) => c.user.id === api.bot.id), 20_000, 'the answer created');
      first.kill('SIGKILL');
      await exited(first);

      const db = new Database(cfg.db, { readonly: true });
      try {
        const state = () =>
          db.prepare(`SELECT delivery, parts_sent FROM messages WHERE is_from_me = 1`).all() as Array<{
            delivery: string;
            parts_sent: number;
          }>;
        // Killed between acceptance and record: the row still says nothing was sent.
        expect(state()).toEqual([{ delivery: 'pending', parts_sent: 0 }]);

        const second = await gatedUp(gatedRun(env));
        try {
          await until(() => state()[0]?.delivery === 'sent', 30_000, 'the answer recorded as sent');
          // The same delivery again (GitHub's Redeliver) is stored once and not answered twice.
          expect(await api.redeliver(`${urlOf(second)}/hooks/github`, 'delivery-1', SECRET)).toBe(204);
          await new Promise((r) => setTimeout(r, 500));
        } finally {
          second.kill('SIGTERM');
          await exited(second);
        }
        const mine = api.comments.filter((c) => c.user.id === api.bot.id);
        expect(mine).toHaveLength(1);
        expect(mine[0]!.body).toMatch(/^echo: how do I build this\?/);
        expect(db.prepare(`SELECT count(*) FROM messages WHERE is_from_me = 0`).pluck().get()).toBe(1);
        expect(state()).toEqual([{ delivery: 'sent', parts_sent: 1 }]);
      } finally {
        db.close();
      }
    } finally {
      await api.close();
    }
  },
);
