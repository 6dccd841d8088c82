import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Runs the real git as a person at the keyboard would (no hardening): to build the test's repositories. */
export function plainGit(cwd: string, ...args: string[]): string {
  return execFileSync(
    'git',
    [
      // A worktree a root gated handed to a container's user is not the tester's.
      '-c',
      'safe.directory=*',
      '-c',
      'user.name=tester',
      '-c',
      'user.email=tester@example.test',
      '-c',
      'init.defaultBranch=main',
      ...args,
    ],
    {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd },
    },
  ).trim();
}

/** A repository at `dir` with one commit on `main`: shared.txt saying `base`. */
export function makeRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  plainGit(dir, 'init', '-q');
  writeFileSync(join(dir, 'shared.txt'), 'base\n');
  plainGit(dir, 'add', 'shared.txt');
  plainGit(dir, 'commit', '-q', '-m', 'base');
  return dir;
}
