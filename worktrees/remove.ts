import { existsSync } from 'node:fs';
import { repoGit, withRepoLock } from './git.js';
import { adminDirOf, listGitWorktrees, type RepoPlace } from './worktrees.js';

/**
 * A topic's worktree removed without losing work (docs/WORKTREES.md, "Removal"): what it held and nobody
 * committed becomes a commit on its branch first; the worktree goes; the branch goes only when every commit
 * on it is already on the base branch or on a remote, and is kept (with the count of its unpushed commits)
 * otherwise.
 */

/** What removing one worktree did. */
export interface Removal {
  branch: string;
  /** True when the worktree held uncommitted changes, now committed on the branch. */
  saved: boolean;
  /** Commits on the branch that neither the base branch nor any remote has. */
  unpushed: number;
  /** True when the branch was kept (it holds unpushed work). */
  kept: boolean;
}

/** The commits of `branch` that neither `base` nor a remote-tracking ref has, and those of `base` it lacks. */
export async function aheadBehind(
  gitDir: string,
  base: string,
  branch: string,
): Promise<{ ahead: number; behind: number } | null> {
  const out = await repoGit({ gitDir }, [
    'rev-list',
    '--left-right',
    '--count',
    `refs/heads/${base}...refs/heads/${branch}`,
  ]).catch(() => null);
  const m = out === null ? null : /^(\d+)\s+(\d+)/.exec(out);
  return m ? { behind: Number(m[1]), ahead: Number(m[2]) } : null;
}

async function unpushedOf(gitDir: string, base: string, branch: string): Promise<number> {
  const out = await repoGit({ gitDir }, [
    'rev-list',
    '--count',
    `refs/heads/${branch}`,
    '--not',
    `refs/heads/${base}`,
    '--remotes',
  ]).catch(() => '0');
  return Number(out.trim()) || 0;
}

/** Identity and settings of the one commit gated makes itself: the work a removed worktree still held. */
const SAVE = ['-c', 'user.name=gated', '-c', 'user.email=gated@localhost', '-c', 'commit.gpgSign=false'];

/**
 * Removes the worktree at `path` (on `branch`) of the repository `repo`, serialized with every other git
 * operation on it. A folder already gone is forgotten by git (`worktree prune`) and its branch judged alike.
 */
export function removeWorktree(
  repo: RepoPlace,
  path: string,
  branch: string,
  topic: string,
): Promise<Removal> {
  const { gitDir } = repo;
  return withRepoLock(gitDir, async () => {
    let saved = false;
    const known = await listGitWorktrees(gitDir);
    if (known.has(path) && existsSync(path)) {
      const adminDir = adminDirOf(gitDir, path);
      const place = { gitDir: adminDir, workTree: path };
      const dirty = (await repoGit(place, ['status', '--porcelain', '--untracked-files=all'])).trim() !== '';
      if (dirty) {
        await repoGit(place, ['add', '--all']);
        await repoGit(place, [
          ...SAVE,
          'commit',
          '--no-verify',
          '--quiet',
          '-m',
          `gated: the uncommitted work of ${topic ? '#' + topic : 'the default topic'} when its worktree was removed`,
        ]);
        saved = true;
      }
      await repoGit({ gitDir }, ['worktree', 'remove', '--force', path]);
    }
    await repoGit({ gitDir }, ['worktree', 'prune']);
    const unpushed = await unpushedOf(gitDir, repo.branch, branch);
    const kept = unpushed > 0;
    if (!kept) await repoGit({ gitDir }, ['branch', '-D', branch]).catch(() => '');
    return { branch, saved, unpushed, kept };
  });
}
