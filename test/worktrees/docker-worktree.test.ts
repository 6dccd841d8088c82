/**
 * The docker runtime on a real engine (test/infra/dockerd.ts) running a topic of a group bound to a
 * repository: the container sees its worktree at /workspace and the repository's git folders at their host
 * paths (the shared one read-only, the worktree's own read-write), nothing of the group's folder or of
 * another topic; its commit, made on a detached HEAD into its own object folder, is taken in on the host
 * onto its branch.
 */
import { readdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { packageFile } from '../../core/paths.js';
import { createQueue } from '../../queue/queue.js';
import { createDockerRuntime } from '../../queue/runtime/docker.js';
import { WorktreeStore } from '../../store/worktrees.js';
import { bindRepository, ensureWorktree, reposDirOf, repoHomeOf } from '../../worktrees/worktrees.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { recordingSignals } from '../helpers/signals.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { ready } from '../queue/helpers.js';
import { makeRepo, plainGit } from './helpers.js';

const IMAGE = 'gated-git-agent:test';
let engine: TestDockerd | undefined;

beforeAll(async () => {
  engine = await startDockerd();
  await engine.buildAgentImage(IMAGE, packageFile('test', 'worktrees', 'agents'), 'git-agent.mjs', ['git']);
}, 300_000);

afterAll(async () => {
  await engine?.stop();
});

async function until(check: () => boolean, what: string, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it(
  'mounts only the topic worktree and its git folders; the commit lands on the topic branch',
  { timeout: 180_000 },
  async () => {
    const root = tempDir();
    const groupsDir = join(root, 'groups');
    const source = makeRepo(join(root, 'project'));
    const { db } = freshDb();
    db.prepare(`INSERT INTO registered_groups (folder, name) VALUES ('code', 'Code')`).run();
    const reposDir = reposDirOf(groupsDir);
    const place = await bindRepository(reposDir, 'code', source);
    const store = new WorktreeStore(db);
    store.bind({ group_folder: 'code', source, git_dir: place.gitDir, branch: 'main', cloned: 0 });
    // Another topic's worktree exists beside it: the container must not see it.
    const other = await ensureWorktree(reposDir, place, 'code', 'other');

    const { signals } = recordingSignals();
    const runtime = createDockerRuntime({
      docker: engine!.docker,
      image: IMAGE,
      instanceId: `wt-${process.pid}`,
      groupsDir,
      memoryBytes: 256 * 1024 * 1024,
      pidsLimit: 64,
      nanoCpus: 500_000_000,
    });
    const queue = createQueue({
      db,
      runtime,
      config: {
        groupsDir,
        maxConcurrent: 2,
        idleTimeoutMs: 200,
        runTimeoutMs: 120_000,
        maxOutputBytes: 1 << 20,
      },
      log: silentLogger(),
      signals,
    });
    try {
      ready(db, { group: 'code', topic: 'fix', content: 'change it' });
      queue.wake();
      const reply = () =>
        db.prepare('SELECT content FROM messages WHERE is_from_me = 1').pluck().get() as string | undefined;
      await until(() => reply() !== undefined, 'the answer');
      const a = JSON.parse(reply()!) as {
        seen: string;
        branch: string;
        mounts: string[];
        sharedWritable: boolean;
      };
      const tree = store.worktree('code', 'fix')!;
      const common = realpathSync(place.gitDir);
      const admin = join(common, 'worktrees', 'topic-fix');
      expect(a.seen).toBe('changed by fix\n');
      // The agent worked on a detached HEAD at the branch (a branch is in the shared folder it cannot write).
      expect(a.branch).toBe('HEAD');
      expect(a.sharedWritable).toBe(false);
      expect(a.mounts.sort()).toEqual([`${admin} rw`, `${common} ro`, '/tmp rw', '/workspace rw'].sort());
      expect(a.mounts.join(' ')).not.toContain(other.path);
      expect(a.mounts.join(' ')).not.toContain(groupsDir);

      // Taken in after the run: the branch moved to the agent's commit, HEAD on the branch again.
      // The run ends only once its agent's exit was followed by the taking in.
      await until(
        () => db.prepare('SELECT ended_at FROM session_log').pluck().get() != null,
        'the run ended',
      );
      expect(plainGit(source, 'log', '-1', '--format=%s', 'topic-fix')).toBe('change of fix');
      expect(plainGit(source, 'show', 'topic-fix:shared.txt')).toBe('changed by fix');
      expect(plainGit(tree.path, 'symbolic-ref', 'HEAD')).toBe('refs/heads/topic-fix');
      expect(plainGit(tree.path, 'status', '--porcelain')).toBe('');
      expect(plainGit(source, 'fsck', '--no-progress')).toBe('');
      // The agent's own object folder is emptied once its objects are in the shared store.
      expect(readdirSync(join(admin, 'objects'))).toEqual([]);
      expect(plainGit(source, 'show', 'main:shared.txt')).toBe('base');
      expect(tree.path).toBe(join(repoHomeOf(reposDir, 'code'), 'topic-fix'));
    } finally {
      await queue.close(5000);
      await runtime.close?.();
    }
  },
);
