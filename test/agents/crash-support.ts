/**
 * What the crash tests of the agents share (claude-resume, codex-resume): killing, as the machine's end
 * would, every process a run left working in its group's folder after gated itself was killed with -9.
 */
import { readFileSync, readdirSync, readlinkSync, realpathSync } from 'node:fs';
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
