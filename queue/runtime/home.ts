import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentUser } from './agent-user.js';
import { chownTreeAt } from './owner.js';

/** The name of an agent's HOME inside its group's folder (process runtime). */
export const AGENT_HOME_DIR = '.home';

/**
 * The HOME of a process-runtime agent: `.home` in its group's folder, made private to the agent's user
 * (0700), never the operator's. Dotfiles the agent's tools read or write (`bash -l`, a CLI's config and
 * caches) stay in the folder the agent owns anyway; the operator's home is not named to it. Whatever the
 * agent left at that name that is not a directory (a link to the operator's home, a file) is removed first,
 * without following it, and a directory made in its place. With an `owner` (the agent's own uid under a
 * root gated, queue/runtime/agent-user.ts), the folder and the HOME are handed to that user (`handOver`).
 *
 * Also makes the group's folder when it is missing. Checked on every run (the agent may have replaced
 * `.home` since the last one); a run whose `.home` is already a directory costs one lstat, a group's first
 * run one lstat and one mkdir. Through the spawner (SpawnRequest.home) the spawner does the same steps
 * (queue/runtime/spawner.mjs `makeHome`), so this runs in gated only when it spawns agents itself.
 */
export function agentHome(groupDir: string, owner?: AgentUser): string {
  const home = join(groupDir, AGENT_HOME_DIR);
  const st = lstatSync(home, { throwIfNoEntry: false });
  if (!st?.isDirectory()) {
    if (st) rmSync(home, { force: true });
    try {
      mkdirSync(home, { mode: 0o700 });
    } catch (err) {
      // The group's folder itself is missing (a group's first run): made, then its .home.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      mkdirSync(groupDir, { recursive: true });
      mkdirSync(home, { mode: 0o700 });
    }
  }
  if (owner) {
    handOver(groupDir, owner);
    handOver(home, owner);
  }
  return home;
}

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

/**
 * Gives the folder `dir` and what is below it to `owner` when someone else owns it (its first run as that
 * user; later runs cost one open and one fstat): opened without following a link at its name, then walked
 * through descriptors by owner.ts (links, hard links, FIFOs and devices keep their owner).
 */
export function handOver(dir: string, owner: AgentUser): void {
  const fd = openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  try {
    if (fstatSync(fd).uid !== owner.uid) chownTreeAt(fd, owner.uid, owner.gid);
  } finally {
    closeSync(fd);
  }
}
