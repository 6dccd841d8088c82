import { closeSync, constants, openSync } from 'node:fs';
import type { Logger } from '../../core/log.js';
import { containerGit, takeInCommits, type ContainerGit } from '../../worktrees/container.js';
import { chownTreeAt } from './owner.js';
import type { AgentHandle, WorkTree } from './types.js';

/**
 * A container run in a topic's worktree (docs/WORKTREES.md, "In a container"): before it starts, the
 * worktree's git folder is readied (HEAD detached at the branch, a folder for the agent's objects) and,
 * under a root gated, handed to the agent's user as the worktree is; after it ends, its commits are taken
 * in on the host (worktrees/container.ts).
 */
export async function readyWorktreeGit(work: WorkTree, user: string): Promise<ContainerGit> {
  const git = await containerGit(work);
  const m = /^(\d+):(\d+)$/.exec(user);
  if (process.getuid?.() === 0 && m && m[1] !== '0') {
    const fd = openSync(work.adminDir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      chownTreeAt(fd, Number(m[1]), Number(m[2]));
    } finally {
      closeSync(fd);
    }
  }
  return git;
}

/** The handle, whose `exited` resolves only after the run's commits were taken in (never rejects). */
export function takingInAfter(
  handle: AgentHandle,
  work: WorkTree,
  log: Logger | undefined,
  runId: number,
): AgentHandle {
  const exited = handle.exited.then(async (end) => {
    try {
      const taken = await takeInCommits(work);
      if (taken.commits > 0) log?.info({ runId, branch: work.branch, ...taken }, 'agent commits taken in');
    } catch (err) {
      log?.warn(
        { runId, branch: work.branch, err },
        'agent commits not taken in; the branch stays where it was',
      );
    }
    return end;
  });
  return {
    get stdout() {
      return handle.stdout;
    },
    write: (line) => handle.write(line),
    get stdinOpen() {
      return handle.stdinOpen;
    },
    closeStdin: () => handle.closeStdin(),
    kill: () => handle.kill(),
    exited,
  };
}
