/**
 * The Codex agent's private folders in the shared temp folder (agents/codex/owned-dir.mjs): a run's start
 * removes those whose owner is gone (a run killed with -9), and only those; an owner in another PID
 * namespace (every run of the process runtime has its own, with its own /proc) counts as alive while it
 * runs.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect, test } from 'vitest';
// @ts-expect-error: the agent's own plain module, without types
import { ownedTempDir, removeOwnedDir, sweepOwnedDirs } from '../../agents/codex/owned-dir.mjs';
import { packageFile } from '../../core/paths.js';
import { pidNamespacePrefix } from '../../queue/runtime/process.js';
import { tempDir } from '../helpers/db.js';
import { exited, until } from '../helpers/process.js';

const PREFIX = 'gated-codex-home-';
const sweep = (parent: string, prefix = PREFIX) => sweepOwnedDirs(parent, prefix) as Promise<number>;

/** The pid of a process that ran and exited. */
async function deadPid(): Promise<number> {
  const child = spawn('true');
  await new Promise((r) => child.once('exit', r));
  return child.pid!;
}

/**
 * A process that makes an owned folder in `parent` and then waits, started behind `prefix` (a PID
 * namespace of its own, or none); resolves once the folder is made.
 */
async function owner(parent: string, prefix: readonly string[]) {
  const script =
    `const m = await import(${JSON.stringify(packageFile('agents', 'codex', 'owned-dir.mjs'))});` +
    `console.log(await m.ownedTempDir(${JSON.stringify(parent)}, '${PREFIX}'));` +
    `setInterval(() => {}, 60000);`;
  const [bin, ...args] = [...prefix, process.execPath, '--input-type=module', '-e', script];
  const child = spawn(bin!, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the owner exited (${code}) before making its folder`)));
  });
  return { child, dir };
}

test("a folder whose owner is gone is removed; a live owner's and an unowned one stay", async () => {
  const parent = tempDir('gated-owned-');
  const mine = (await ownedTempDir(parent, PREFIX)) as string;
  expect(readdirSync(mine).sort()).toEqual(['.gated-alive', '.gated-owner']);

  // Made by a process that exited without removing it (as kill -9 leaves it): its socket refuses.
  const ended = await owner(parent, []);
  ended.child.kill('SIGKILL');
  await exited(ended.child);

  const make = (name: string, text?: string) => {
    mkdirSync(join(parent, name));
    if (text !== undefined) writeFileSync(join(parent, name, '.gated-owner'), text);
    return join(parent, name);
  };
  const unowned = make(`${PREFIX}nofile`);
  const otherPrefix = make('gated-codex-abcdef', `${await deadPid()} 1 -\n`);
  const longer = make(`${PREFIX}toolong7`, `${await deadPid()} 1 -\n`);

  expect(await sweep(parent)).toBe(1);
  expect(existsSync(ended.dir)).toBe(false);
  expect(existsSync(mine)).toBe(true);
  expect(existsSync(unowned)).toBe(true);
  expect(existsSync(longer)).toBe(true);
  // The socket folders' prefix is another sweep's; its folder has no socket, and its owner file names no
  // PID namespace: no pid in it is judged.
  expect(existsSync(otherPrefix)).toBe(true);
  expect(await sweep(parent, 'gated-codex-')).toBe(0);
  expect(existsSync(mine)).toBe(true);
  removeOwnedDir(mine);
  expect(existsSync(mine)).toBe(false);
});

test('without a socket, a pid is judged only in the PID namespace that wrote it', async () => {
  const parent = tempDir('gated-owned-');
  const ns = readlinkSync('/proc/self/ns/pid');
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  const make = (name: string, text: string) => {
    mkdirSync(join(parent, PREFIX + name));
    writeFileSync(join(parent, PREFIX + name, '.gated-owner'), text);
    return join(parent, PREFIX + name);
  };
  const dead = make('dead01', `${await deadPid()} 123 ${ns}\n`);
  // pid 1 runs, but started at another time than this file says: the pid was used again.
  const reused = make('reuse1', `1 999999999999 ${ns}\n`);
  const live = make('live01', `${process.pid} ${started} ${ns}\n`);
  const elsewhere = make('other1', `${await deadPid()} 123 pid:[1]\n`);
  expect(await sweep(parent)).toBe(2);
  expect([dead, reused, live, elsewhere].map((d) => existsSync(d))).toEqual([false, false, true, true]);
});

test('an owner in another PID namespace keeps its folder while it runs, and loses it once killed', async () => {
  const prefix = await pidNamespacePrefix();
  // The process runtime runs every agent so where the machine allows it; this machine must.
  expect(prefix.length, 'no PID namespace can be made here (unshare)').toBeGreaterThan(0);
  const parent = tempDir('gated-owned-');
  const other = await owner(parent, prefix);
  // Its pid is its namespace's (1 or 2): in this /proc that names another process, or none.
  const [pid] = readFileSync(join(other.dir, '.gated-owner'), 'utf8').split(' ');
  expect(Number(pid)).toBeLessThan(10);
  try {
    expect(await sweep(parent)).toBe(0);
    expect(existsSync(other.dir)).toBe(true);
  } finally {
    other.child.kill('SIGKILL');
    await exited(other.child);
  }
  // `unshare --kill-child` kills the namespace's process when it dies itself; the kernel then closes the
  // socket, and the next sweep removes the folder.
  await until(async () => ((await sweep(parent)) === 1 ? true : undefined), 10_000, 'the folder removed');
  expect(existsSync(other.dir)).toBe(false);
});
