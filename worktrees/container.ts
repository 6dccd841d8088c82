import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { repoGit, repoGitBytes, withRepoLock } from './git.js';

/**
 * A worktree's git metadata for an agent in a container (docs/WORKTREES.md, "In a container";
 * docs/SECURITY.md). The container gets its worktree at /workspace and, at their host paths, so that the
 * worktree's `.git` file and its `commondir` resolve as they do on the host:
 * - the repository's common git folder, read-only (objects, refs, config: the agent reads history, writes
 *   none of it);
 * - the worktree's own git folder (`<common>/worktrees/<name>`: HEAD, index), read-write;
 * and two variables: new objects go to `<worktree's git folder>/objects` (GIT_OBJECT_DIRECTORY), the shared
 * ones are read from the common folder (GIT_ALTERNATE_OBJECT_DIRECTORIES).
 * The worktree is handed over on a detached HEAD at its branch's tip (a branch lives in the common folder,
 * which the agent cannot write); the agent commits as usual. After the run, gated takes the commits in on
 * the host: every object they need is repacked and read back by `git index-pack --strict` (each object's
 * name computed from its content, each checked), and the branch is moved to the agent's HEAD. An agent can
 * so never write another topic's branch, the shared objects or the repository's config.
 */

/** What a container needs for its worktree's git: mounts beside /workspace, and environment. */
export interface ContainerGit {
  mounts: { source: string; target: string; readOnly: boolean }[];
  env: string[];
}

/** The folder the agent's new objects go to. */
export function agentObjectsOf(adminDir: string): string {
  return join(adminDir, 'objects');
}

/**
 * Detaches the worktree's HEAD at its branch's tip and makes the folder for the agent's objects; returns
 * what the container mounts and sets. Serialized with the repository's other git operations.
 */
export function containerGit(w: { gitDir: string; adminDir: string; branch: string }): Promise<ContainerGit> {
  return withRepoLock(w.gitDir, async () => {
    const tip = (
      await repoGit({ gitDir: w.gitDir }, ['rev-parse', '--verify', `refs/heads/${w.branch}^{commit}`])
    ).trim();
    await repoGit({ gitDir: w.adminDir }, ['update-ref', '--no-deref', 'HEAD', tip]);
    mkdirSync(agentObjectsOf(w.adminDir), { recursive: true });
    return {
      mounts: [
        { source: w.gitDir, target: w.gitDir, readOnly: true },
        { source: w.adminDir, target: w.adminDir, readOnly: false },
      ],
      env: [
        `GIT_OBJECT_DIRECTORY=${agentObjectsOf(w.adminDir)}`,
        `GIT_ALTERNATE_OBJECT_DIRECTORIES=${join(w.gitDir, 'objects')}`,
      ],
    };
  });
}

/** What taking a run's commits in did. */
export interface TakenIn {
  /** The branch's new tip, or null when the agent made no commit. */
  tip: string | null;
  /** Commits new on the branch. */
  commits: number;
}

/**
 * Takes the agent's commits in after its run: its detached HEAD's commit and every object it needs into the
 * common store (verified by index-pack), the branch moved there, HEAD attached to the branch again, the
 * agent's object folder emptied. A HEAD that is not a commit the objects can show is left alone (the branch
 * stays where it was) and thrown as an error naming it.
 */
export function takeInCommits(w: { gitDir: string; adminDir: string; branch: string }): Promise<TakenIn> {
  return withRepoLock(w.gitDir, async () => {
    const objects = agentObjectsOf(w.adminDir);
    const head = readFileSync(join(w.adminDir, 'HEAD'), 'utf8').trim();
    const ref = `refs/heads/${w.branch}`;
    const tip = (await repoGit({ gitDir: w.gitDir }, ['rev-parse', '--verify', `${ref}^{commit}`])).trim();
    const reattach = () => repoGit({ gitDir: w.adminDir }, ['symbolic-ref', 'HEAD', ref]);
    if (!/^[0-9a-f]{40,64}$/.test(head) || head === tip) {
      await reattach();
      emptyFolder(objects);
      return { tip: null, commits: 0 };
    }
    const both = { gitDir: w.gitDir, alternates: objects };
    const list = await repoGitBytes(both, ['rev-list', '--objects', head, '--not', ref]);
    const pack = await repoGitBytes(both, ['pack-objects', '--stdout', '--quiet'], list);
    await repoGitBytes({ gitDir: w.gitDir }, ['index-pack', '--stdin', '--strict', '--fix-thin'], pack);
    const commits = Number(
      (await repoGit({ gitDir: w.gitDir }, ['rev-list', '--count', head, '--not', ref])).trim(),
    );
    await repoGit({ gitDir: w.gitDir }, ['update-ref', ref, head, tip]);
    await reattach();
    emptyFolder(objects);
    return { tip: head, commits };
  });
}

function emptyFolder(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}
