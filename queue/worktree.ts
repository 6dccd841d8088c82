import { isoNow, type SessionKey } from '../core/types.js';
import type { Logger } from '../core/log.js';
import type { Db } from '../store/db.js';
import { WorktreeStore } from '../store/worktrees.js';
import { ensureWorktree, repoHomeOf, reposDirOf } from '../worktrees/worktrees.js';
import type { RunSpec, WorkTree } from './runtime/types.js';

/**
 * A run of a group bound to a repository works in its topic's worktree (docs/WORKTREES.md): made at the
 * topic's first run, found again after, recorded with the time of the run. A group without a repository
 * keeps its folder. A git failure fails the start (the run's rows are retried like any failed start).
 */
export async function withWorktree(
  db: Db,
  groupsDir: string,
  spec: RunSpec,
  key: SessionKey,
  log: Logger,
  now: () => number = Date.now,
): Promise<RunSpec> {
  const store = new WorktreeStore(db);
  const repo = store.repo(key.group);
  if (repo === undefined) return spec;
  const reposDir = reposDirOf(groupsDir);
  const known = store.worktree(key.group, key.topic);
  const tree = await ensureWorktree(
    reposDir,
    { gitDir: repo.git_dir, branch: repo.branch, cloned: repo.cloned === 1 },
    key.group,
    key.topic,
    known?.branch,
  );
  if (tree.created) log.info({ group: key.group, topic: key.topic, branch: tree.branch }, 'worktree made');
  try {
    store.ran(key.group, key.topic, tree.path, tree.branch, isoNow(now()));
  } catch (err) {
    // Only the list's last-run time is lost (another process holds the write lock); the run goes on.
    log.warn({ err, group: key.group }, 'worktree run time not recorded');
  }
  const work: WorkTree = {
    dir: tree.path,
    root: repoHomeOf(reposDir, key.group),
    gitDir: repo.git_dir,
    adminDir: tree.adminDir,
    branch: tree.branch,
  };
  return { ...spec, work };
}
