import { existsSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { packageFile } from '../../core/paths.js';
import { createQueue } from '../../queue/queue.js';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import type { WorkQueue } from '../../queue/types.js';
import { WorktreeStore } from '../../store/worktrees.js';
import { bindRepository, reposDirOf, repoHomeOf, topicBranch } from '../../worktrees/worktrees.js';
import { spawnGatedCli } from '../helpers/cli.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { recordingSignals } from '../helpers/signals.js';
import { ready } from '../queue/helpers.js';
import { makeRepo, plainGit } from './helpers.js';

const agent = packageFile('test', 'worktrees', 'agents', 'git-agent.mjs');
const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(5000);
});

/** Polls `check` until it holds, with a deadline a loaded machine meets. */
async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a worktree per topic', { timeout: 120_000 }, () => {
  it('names branches from topics, keeping issue-, pr- and thread- names and never sharing one', () => {
    expect(topicBranch('')).toBe('main-topic');
    expect(topicBranch('issue-42')).toBe('issue-42');
    expect(topicBranch('pr-17')).toBe('pr-17');
    expect(topicBranch('thread-abc')).toBe('thread-abc');
    expect(topicBranch('support')).toBe('topic-support');
    expect(topicBranch('Support')).toMatch(/^topic-support-[0-9a-f]{6}$/);
    expect(topicBranch('a_b')).toMatch(/^topic-a-b-[0-9a-f]{6}$/);
    expect(topicBranch('a_b')).not.toBe(topicBranch('a-b'));
  });

  it('two topics of one group change the same file at once: each sees only its own change and commits on its own branch', async () => {
    const root = tempDir();
    const groupsDir = join(root, 'groups');
    mkdirSync(groupsDir);
    const source = makeRepo(join(root, 'project'));
    const barrier = join(root, 'barrier');
    mkdirSync(barrier);
    const { db } = freshDb();
    db.prepare(`INSERT INTO registered_groups (folder, name) VALUES ('code', 'Code')`).run();
    const place = await bindRepository(reposDirOf(groupsDir), 'code', source);
    expect(place).toEqual({ gitDir: realpathSync(join(source, '.git')), branch: 'main', cloned: false });
    const store = new WorktreeStore(db);
    store.bind({ group_folder: 'code', source, git_dir: place.gitDir, branch: 'main', cloned: 0 });

    const { signals } = recordingSignals();
    const runtime = createProcessRuntime({
      cmd: `node "${agent}"`,
      env: { BARRIER: barrier, AGENTS: '2' },
      spawner: false,
      // As the operator's own agent under a non-root gated: the agent may write the repository's objects.
      user: 'root',
      log: silentLogger(),
    });
    const queue = createQueue({
      db,
      runtime,
      config: {
        groupsDir,
        maxConcurrent: 5,
        idleTimeoutMs: 200,
        runTimeoutMs: 60_000,
        maxOutputBytes: 1 << 20,
      },
      log: silentLogger(),
      signals,
    });
    queues.push(queue);
    ready(db, { group: 'code', topic: 'alpha', content: 'change it' });
    ready(db, { group: 'code', topic: 'beta', content: 'change it' });
    queue.wake();

    const replies = () =>
      db.prepare('SELECT content FROM messages WHERE is_from_me = 1 ORDER BY id').pluck().all() as string[];
    await until(() => replies().length === 2, 'both answers');
    const answers = replies().map((r) => JSON.parse(r) as { seen: string; branch: string; cwd: string });
    const home = repoHomeOf(reposDirOf(groupsDir), 'code');
    expect(answers.map((a) => a.branch).sort()).toEqual(['topic-alpha', 'topic-beta']);
    for (const a of answers) {
      const topic = a.branch.replace('topic-', '');
      // Each agent read back its own change, though the other changed the same file meanwhile.
      expect(a.seen).toBe(`changed by ${topic}\n`);
      expect(realpathSync(a.cwd)).toBe(realpathSync(join(home, a.branch)));
      expect(plainGit(source, 'show', `${a.branch}:shared.txt`)).toBe(`changed by ${topic}`);
      expect(plainGit(source, 'log', '--format=%s', '-1', a.branch)).toBe(`change of ${topic}`);
    }
    // The base branch and the operator's own checkout are untouched.
    expect(plainGit(source, 'show', 'main:shared.txt')).toBe('base');
    expect(readFileSync(join(source, 'shared.txt'), 'utf8')).toBe('base\n');
    // The agent's HOME inside its worktree is never something to commit.
    expect(plainGit(join(home, 'topic-alpha'), 'status', '--porcelain')).toBe('');
    expect(store.worktrees('code').map((w) => [w.topic, w.branch, w.last_run_at !== null])).toEqual([
      ['alpha', 'topic-alpha', true],
      ['beta', 'topic-beta', true],
    ]);
    expect(existsSync(join(groupsDir, 'code', 'shared.txt'))).toBe(false);
  });
});

describe('gated groups repo', { timeout: 60_000 }, () => {
  it('binds a group to a local repository or a clone, shown by groups list; refuses a missing group or branch', async () => {
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    const source = makeRepo(join(dir, 'project'));
    expect(spawnGatedCli(db, {}, 'groups', 'add', 'code')).toMatchObject({ code: 0 });
    expect(spawnGatedCli(db, {}, 'groups', 'add', 'pub/clone')).toMatchObject({ code: 0 });
    expect(spawnGatedCli(db, {}, 'groups', 'repo', 'nope', source)).toMatchObject({ code: 2 });
    const badBranch = spawnGatedCli(db, {}, 'groups', 'repo', 'code', source, '--branch', 'nope');
    expect(badBranch.code).toBe(2);
    expect(badBranch.err).toMatch(/no branch 'nope'/);
    const adopted = spawnGatedCli(db, {}, 'groups', 'repo', 'code', source);
    expect(adopted.out).toMatch(/group code bound to .*project \(adopted, base branch main\)/);
    const cloned = spawnGatedCli(db, {}, 'groups', 'repo', 'pub/clone', `file://${source}`);
    expect(cloned.out).toMatch(/\(cloned, base branch main\)/);
    // The clone lies beside the groups folder, under the group's disk name.
    expect(existsSync(join(dir, 'repos', 'pub+clone', 'repo.git', 'HEAD'))).toBe(true);
    const list = spawnGatedCli(db, {}, 'groups', 'list').out;
    expect(list).toMatch(/^folder\tname\timage\tnetwork\tautonomy\trepo\tadded_at$/m);
    expect(list).toMatch(new RegExp(`^code\\t.*\\t${source.replace(/[.+]/g, '\\$&')} \\(main\\)\\t`, 'm'));
    expect(list).toMatch(/^pub\/clone\t.*\tfile:\/\/.* \(main\)\t/m);
  });
});
