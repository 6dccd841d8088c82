/**
 * The process runtime under a root gated (docs/SECURITY.md, "Runtimes"): the real `gated run` as root, with
 * secrets in its environment and its `.env`, and the prying agent (test/agents/prying-agent.mjs), which
 * tries to unmount its /proc, read gated's /proc/<pid>/environ, the database and the `.env`, and list the
 * data folder. It runs as an unprivileged uid of its own and gets none of it, while it still works in its
 * own folder. Runs only as root (as the suite does in CI).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { agentUserOf, DEFAULT_AGENT_USER } from '../../queue/runtime/agent-user.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, until } from '../helpers/process.js';

const ENV_SECRET = 'admin-token-from-the-environment-7f3a';
const DOTENV_SECRET = 'a-secret-only-in-dot-env-91c2';

test.skipIf(process.getuid?.() !== 0)(
  'an agent of a root gated gets nothing of gated: not /proc after umount, not its environ, the database or .env',
  async () => {
    const dir = tempDir('gated-root-');
    const env = gatedEnv(join(dir, 'data'), {
      GATED_ADMIN_TOKEN: ENV_SECRET,
      GATED_AGENT_CMD: 'node "$GATED_HOME/test/agents/prying-agent.mjs"',
    });
    const dotenv = join(dir, '.env');
    writeFileSync(dotenv, `PRYING_SECRET=${DOTENV_SECRET}\n`, { mode: 0o644 });
    const seed = openDatabase(env.GATED_DB);
    addGroup(seed, env.GATED_GROUPS_DIR, 'pry');
    seed.close();

    const child = gatedRun(env, dir);
    try {
      const db = openDatabase(env.GATED_DB);
      insertInbound(db, {
        chat_jid: 'web:pry',
        sender: 'u',
        content: `pry ${child.pid} ${env.GATED_DB} ${dotenv} ${join(dir, 'data')}`,
      });
      const reply = await until(
        () =>
          db
            .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = 'web:pry'`)
            .pluck()
            .get() as string | undefined,
        30_000,
        'the prying agent’s answer',
      );
      db.close();
      const r = JSON.parse(reply) as Record<string, { got?: string; error?: string; status?: number }> & {
        uid: number;
        wrote: string;
      };
      expect(r.uid).toBe(DEFAULT_AGENT_USER.uid);
      // It ran, in its own folder.
      expect(r.wrote).toBe('the agent was here\n');
      // No capability to unmount its namespace's /proc, so the machine's stays hidden.
      expect(r.umount!.status).not.toBe(0);
      // gated is no process it may look into, nor a file it may read; the data folder is not listed.
      for (const what of ['environ', 'db', 'dotenv', 'data'] as const)
        expect([what, r[what]!.error]).toEqual([what, expect.stringMatching(/^E(ACCES|NOENT|PERM)$/)]);
      expect(reply).not.toContain(ENV_SECRET);
      expect(reply).not.toContain(DOTENV_SECRET);
    } finally {
      child.kill('SIGTERM');
      await exited(child);
    }
  },
  60_000,
);

test('GATED_PROCESS_USER: uid:gid or root; only a root gated starts agents as another user', () => {
  expect(agentUserOf(undefined, 0)).toEqual(DEFAULT_AGENT_USER);
  expect(agentUserOf('1234:5678', 0)).toEqual({ uid: 1234, gid: 5678 });
  expect(agentUserOf('root', 0)).toBeNull();
  expect(agentUserOf('0:0', 0)).toBeNull();
  expect(agentUserOf(undefined, 1000)).toBeNull();
  expect(agentUserOf('1000:1000', 1000)).toBeNull();
  expect(() => agentUserOf('2000:2000', 1000)).toThrow(/only a gated run as root/);
  expect(() => agentUserOf('gated-agent', 0)).toThrow(/must be uid:gid/);
});
