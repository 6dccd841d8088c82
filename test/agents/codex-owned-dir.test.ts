/**
 * The Codex agent's private folders in the shared temp folder (agents/codex/owned-dir.mjs): a run's start
 * removes those whose owner is gone (a run killed with -9), and only those.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
// @ts-expect-error: the agent's own plain module, without types
import { ownedTempDir, sweepOwnedDirs } from '../../agents/codex/owned-dir.mjs';
import { tempDir } from '../helpers/db.js';

/** The pid of a process that ran and exited. */
async function deadPid(): Promise<number> {
  const child = spawn('true');
  await new Promise((r) => child.once('exit', r));
  return child.pid!;
}

test("a folder whose owner is gone is removed; a live owner's, a reused pid's owner and an unowned one stay", async () => {
  const parent = tempDir('gated-owned-');
  const mine = ownedTempDir(parent, 'gated-codex-home-') as string;
  expect(readdirSync(mine)).toEqual(['.gated-owner']);

  const make = (name: string, owner?: string) => {
    mkdirSync(join(parent, name));
    if (owner !== undefined) writeFileSync(join(parent, name, '.gated-owner'), owner);
    return join(parent, name);
  };
  const dead = make('gated-codex-home-dead01', `${await deadPid()} 123\n`);
  // pid 1 runs, but started at another time than this file says: the pid was used again.
  const reused = make('gated-codex-home-reuse1', '1 999999999999\n');
  const unowned = make('gated-codex-home-nofile');
  const otherPrefix = make('gated-codex-abcdef', `${await deadPid()} 1\n`);
  const longer = make('gated-codex-home-toolong7', `${await deadPid()} 1\n`);

  expect(sweepOwnedDirs(parent, 'gated-codex-home-')).toBe(2);
  expect(existsSync(dead)).toBe(false);
  expect(existsSync(reused)).toBe(false);
  expect(existsSync(mine)).toBe(true);
  expect(existsSync(unowned)).toBe(true);
  expect(existsSync(longer)).toBe(true);
  // The socket folders' prefix is another sweep's.
  expect(existsSync(otherPrefix)).toBe(true);
  expect(sweepOwnedDirs(parent, 'gated-codex-')).toBe(1);
  expect(existsSync(otherPrefix)).toBe(false);
  expect(existsSync(mine)).toBe(true);
});
