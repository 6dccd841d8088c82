import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { packageFile } from '../../core/paths.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/**
 * The real `gated` CLI as the tests start it in a process: dist/, brought up to date with the sources before
 * the run (test/global-setup.ts, as `npm start` does). A third of the CPU of `node --import tsx` on the
 * sources, which compiles every module again in each process.
 */
export const GATED_BIN = packageFile('dist', 'gated', 'cli.js');

/**
 * Runs the real `gated` CLI as ONE process (`node dist/gated/cli.js`, GATED_BIN), so the test's signals
 * reach gated itself. Killed after the test if still running.
 */
export function spawnGated(args: string[], env: Record<string, string>, cwd?: string): ChildProcess {
  const child = spawn(process.execPath, [GATED_BIN, ...args], {
    env: { ...process.env, ...env },
    ...(cwd !== undefined ? { cwd } : {}),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  return child;
}

const stderrs = new WeakMap<ChildProcess, { text: string }>();

/**
 * `gated run` as a child process (see spawnGated). Its stderr is kept (the last 64 KiB, `stderrOf`) and
 * its tail printed when it exits with an error, so a failing test says why gated died. `cwd`: where it
 * runs (and reads its `.env`); default the test's.
 */
export function gatedRun(env: Record<string, string>, cwd?: string): ChildProcess {
  const child = spawnGated(['run'], env, cwd);
  const err = { text: '' };
  stderrs.set(child, err);
  child.stderr!.on('data', (d) => (err.text = (err.text + String(d)).slice(-65_536)));
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) console.error(`gated exited ${code}: ${err.text.slice(-4000)}`);
  });
  return child;
}

/** What a gatedRun child wrote to stderr so far. */
export function stderrOf(child: ChildProcess): string {
  return stderrs.get(child)?.text ?? '';
}

/** Resolves with a gatedRun child once it is up (it prints where its web chat is). */
export async function gatedUp(child: ChildProcess, ms = 20_000): Promise<ChildProcess> {
  await until(() => stderrOf(child).includes('web chat at'), ms, 'gated up');
  return child;
}

/**
 * The environment of a `gated run` child whose database and groups live in `dir`: any free HTTP port, a
 * 100 ms poll, warnings only; `over` adds or replaces settings.
 */
export function gatedEnv(
  dir: string,
  over: Record<string, string> = {},
): Record<string, string> & { GATED_DB: string; GATED_GROUPS_DIR: string } {
  return {
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_HTTP_PORT: '0',
    GATED_POLL_MS: '100',
    GATED_LOG_LEVEL: 'warn',
    ...over,
  };
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

/** Pids of live processes whose command line is exactly `sleep <n>`. */
export function sleepers(n: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8') === `sleep\0${n}\0`) pids.push(Number(entry));
    } catch {
      // ended while we looked
    }
  }
  return pids;
}
