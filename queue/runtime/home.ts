import { lstatSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** The name of an agent's HOME inside its group's folder (process runtime). */
export const AGENT_HOME_DIR = '.home';

/**
 * The HOME of a process-runtime agent: `.home` in its group's folder, made private to gated's user (0700),
 * never the operator's. Dotfiles the agent's tools read or write (`bash -l`, a CLI's config and caches)
 * stay in the folder the agent owns anyway; the operator's home is not named to it. Whatever the agent left
 * at that name that is not a directory (a link to the operator's home, a file) is removed first, without
 * following it, and a directory made in its place. The agent runs as gated's user: this keeps its tools
 * away from the operator's dotfiles, it is no sandbox (untrusted agents belong in a container).
 *
 * Also makes the group's folder when it is missing. Checked on every run (the agent may have replaced
 * `.home` since the last one); a run whose `.home` is already a directory costs one lstat, a group's first
 * run one lstat and one mkdir. Through the spawner (SpawnRequest.home) the spawner does the same steps
 * (queue/runtime/spawner.mjs `makeHome`), so this runs in gated only when it spawns agents itself.
 */
export function agentHome(groupDir: string): string {
  const home = join(groupDir, AGENT_HOME_DIR);
  const st = lstatSync(home, { throwIfNoEntry: false });
  if (st?.isDirectory()) return home;
  if (st) rmSync(home, { force: true });
  try {
    mkdirSync(home, { mode: 0o700 });
  } catch (err) {
    // The group's folder itself is missing (a group's first run): made, then its .home.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    mkdirSync(groupDir, { recursive: true });
    mkdirSync(home, { mode: 0o700 });
  }
  return home;
}
