/**
 * What the crash tests of the agents share (claude-resume, codex-resume): killing, as the machine's end
 * would, every process a run left working in its group's folder after gated itself was killed with -9.
 */
import {
  lstatSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  type Dirent,
} from 'node:fs';
import { join, relative } from 'node:path';
import { until } from '../helpers/process.js';

/**
 * Kills with -9 the processes working in `folder` whose command line matches `command` (the agent, its
 * CLI, the MCP servers it started); returns how many. Each is checked by its command line first.
 */
export function killWorkingIn(folder: string, command: RegExp): number {
  const real = realpathSync(folder);
  let killed = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) !== real) continue;
      if (!command.test(readFileSync(`/proc/${entry}/cmdline`, 'utf8'))) continue;
      process.kill(Number(entry), 'SIGKILL');
      killed += 1;
    } catch {
      // gone meanwhile
    }
  }
  return killed;
}

/**
 * After gated was killed: kills the run's processes left in `folder` (they may already be gone, ended with
 * their PID namespace) and waits until none is left.
 */
export async function killRun(folder: string, command: RegExp): Promise<void> {
  await until(() => killWorkingIn(folder, command) === 0, 10_000, `no process left in ${folder}`);
}

/** The temp folder of an agent started by gated: its minimal environment names no TMPDIR. */
const AGENT_TMP = '/tmp';

/** The rollout files (relative paths) below `dir`, as agents/codex/home.mjs keeps them. */
function rolloutsBelow(dir: string, base = dir): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return rolloutsBelow(path, base);
    return e.isFile() && /^rollout-.*\.jsonl$/.test(e.name) ? [relative(base, path)] : [];
  });
}

/**
 * Removes the Codex homes (agents/codex/home.mjs) that runs of the group in `folder` left in the agents'
 * temp folder when they were killed with -9 and could not remove them themselves: those holding a rollout
 * file the group's folder holds too (a thread of this group). Other files' runs keep theirs. Returns how
 * many were removed.
 */
export function removeCodexHomes(folder: string): number {
  const ours = new Set(rolloutsBelow(join(folder, '.codex-agent', 'sessions')));
  if (ours.size === 0) return 0;
  let removed = 0;
  for (const name of readdirSync(AGENT_TMP)) {
    if (!/^gated-codex-home-[A-Za-z0-9]{6}$/.test(name)) continue;
    const home = join(AGENT_TMP, name);
    if (!lstatSync(home, { throwIfNoEntry: false })?.isDirectory()) continue;
    if (!rolloutsBelow(join(home, 'sessions')).some((r) => ours.has(r))) continue;
    rmSync(home, { recursive: true, force: true });
    removed += 1;
  }
  return removed;
}
