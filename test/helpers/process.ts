import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach } from 'vitest';
import { packageFile } from '../../core/paths.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/**
 * Runs the real `gated` CLI as ONE process on the sources (`node --import tsx`; the tsx binary would put a
 * wrapper process between the test's signals and gated). Killed after the test if still running.
 */
export function spawnGated(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', packageFile('gated', 'cli.ts'), ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  return child;
}

/** Resolves with the child's exit code (at once if it already exited). */
export function exited(c: ChildProcess): Promise<number | null> {
  return new Promise((r) => (c.exitCode !== null ? r(c.exitCode) : c.once('exit', (code) => r(code))));
}

/**
 * Polls `fn` until it returns something other than undefined, null or false, and resolves with it; fails
 * naming `what` after `ms`. For conditions another process or real I/O must bring about. The suite's one
 * wait helper: `fn` may be async (a query to a real server).
 */
export async function until<T>(
  fn: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  ms = 10_000,
  what = 'condition',
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
