import { execFile, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { afterEach, vi } from 'vitest';
import { main } from '../../gated/program.js';
import { inProcessGateds } from './in-process.js';
import { GATED_BIN } from './process.js';

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

/** What one run of the CLI did: its exit code and what it wrote. */
export interface CliResult {
  code: number | null;
  out: string;
  err: string;
}

/**
 * Runs the `gated` program in this process against the database `db` (given first, so an argument list
 * that takes anything, such as `tools explain`'s input line, cannot swallow it); returns its exit code and
 * output. The groups and configuration folders are beside the database unless the test set them: never
 * the checkout's ./data (the defaults). While a test's gated runs in this process, the CLI runs as a
 * process of its own instead (dist/gated/cli.js), so that its wait for a lock cannot hold up that gated.
 */
export async function gatedCli(db: string, ...args: string[]): Promise<CliResult> {
  const dirs = {
    GATED_GROUPS_DIR: join(dirname(db), 'groups'),
    GATED_CONFIG_DIR: join(dirname(db), 'config'),
  };
  // A gated of this test runs in this process: a synchronous wait for its write lock here would hold the
  // lock's owner too (test/helpers/in-process.ts).
  if (inProcessGateds.size > 0) return cliProcess(['--db', db, ...args], { ...dirs, ...process.env });
  let out = '';
  let err = '';
  const set = Object.keys(dirs).filter((k) => process.env[k] === undefined) as Array<keyof typeof dirs>;
  for (const k of set) process.env[k] = dirs[k];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  process.exitCode = undefined;
  try {
    await main(['node', 'gated', '--db', db, ...args]);
  } finally {
    vi.restoreAllMocks();
    for (const k of set) delete process.env[k];
  }
  const code = Number(process.exitCode ?? 0);
  process.exitCode = undefined;
  return { code, out, err };
}

/**
 * Runs the real `gated` CLI in a child process against `db`, the groups folder beside it, with `env` over
 * this process's environment.
 */
export function spawnGatedCli(db: string, env: Record<string, string>, ...args: string[]): CliResult {
  const r = spawnSync(process.execPath, [GATED_BIN, ...args, '--db', db], {
    encoding: 'utf8',
    env: { ...process.env, GATED_GROUPS_DIR: join(db, '..', 'groups'), ...env },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/**
 * As spawnGatedCli, without blocking this process: for a test whose gated runs in this process. A
 * synchronous spawn stops this event loop, so a group commit gated has open (committed at the end of the
 * loop's turn, store/group-commit.ts) keeps the write lock until the child's busy timeout, and the child
 * fails with SQLITE_BUSY after 30 s.
 */
export function runGatedCli(db: string, env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  return cliProcess([...args, '--db', db], {
    ...process.env,
    GATED_GROUPS_DIR: join(db, '..', 'groups'),
    ...env,
  });
}

/** `node dist/gated/cli.js ARGS` with `env` and nothing on its stdin, awaited without blocking this process. */
function cliProcess(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [GATED_BIN, ...args],
      { encoding: 'utf8', env },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, out: stdout, err: stderr });
      },
    );
    child.stdin?.end();
  });
}
