/**
 * A reader that sends a file on takes it into gated's spool while it checks it (core/safe-file.ts,
 * openInFolder): for that moment the folder has no file at that name. A gated killed (SIGKILL) in that
 * moment left the file in the spool for good before restoreSpool; now the journal beside it says where it
 * goes back, and gated's start puts it there. Each test kills a real reader process at the moment the
 * parent sees the name gone, so the spool really holds the file when it dies.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { restoreSpool, SPOOL_DIR } from '../../core/safe-file.js';
import { tempDir } from '../helpers/db.js';
import { closeTestGated, startTestGated } from '../helpers/gated.js';
import { exited, until } from '../helpers/process.js';
import { packageFile } from '../../core/paths.js';

const BODY = 'the report the agent wrote\n';

/** A delivery-like reader: reads `rel` through the spool forever, printing how many reads it made. */
function reader(root: string, rel: string): { child: ChildProcess; reads: () => number } {
  const code = `
    const { readInFolder, spoolOf } = await import(${JSON.stringify(packageFile('core', 'safe-file.ts'))});
    const root = ${JSON.stringify(root)};
    const spool = await spoolOf(root);
    for (let n = 1; ; n++) {
      await readInFolder(root, ${JSON.stringify(rel)}, 1 << 20, spool);
      if (n % 10 === 0) process.stdout.write(n + '\\n');
    }`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let reads = 0;
  child.stdout!.on('data', (d: Buffer) => {
    const last = String(d).trim().split('\n').at(-1);
    if (last) reads = Number(last);
  });
  return { child, reads: () => reads };
}

/** The entries of a spool listing that are files held, not journals. */
const held = (names: string[]): string[] => names.filter((n) => !n.endsWith('.from'));

let running: ChildProcess | undefined;
afterEach(() => {
  if (running && running.exitCode === null && running.signalCode === null) running.kill('SIGKILL');
  running = undefined;
});

/**
 * Kills a reader of `root/rel` the moment the name is seen gone from the folder; tries again with a new
 * reader until one died holding the file (its spool entry and journal left). Returns the spool's names.
 */
async function killHolding(root: string, rel: string): Promise<string[]> {
  const file = join(root, rel);
  for (let attempt = 0; attempt < 10; attempt++) {
    // A reader killed between giving the name back and dropping the spool's (two names: refused as a hard
    // link) leaves what a restart would mend: mended here as gated's start does.
    if (attempt > 0) await restoreSpool(root);
    const r = reader(root, rel);
    running = r.child;
    await until(() => r.reads() >= 20 || r.child.exitCode !== null, 20_000, 'the reader reading');
    expect(r.child.exitCode, 'the reader failed').toBeNull();
    const deadline = Date.now() + 2000;
    while (existsSync(file) && Date.now() < deadline);
    r.child.kill('SIGKILL');
    await exited(r.child);
    if (!existsSync(file)) return readdirSync(join(root, SPOOL_DIR));
  }
  throw new Error('no reader died while holding the file in 10 tries: the test did not reach its case');
}

test(
  'a file held in the spool by a killed reader goes back to its place, unchanged',
  { timeout: 60_000 },
  async () => {
    const root = tempDir();
    mkdirSync(join(root, 'g', 'out'), { recursive: true });
    writeFileSync(join(root, 'g', 'out', 'report.txt'), BODY);
    const spool = await killHolding(root, 'g/out/report.txt');
    // The file itself and its journal (and a journal alone from an earlier reader killed before it took the
    // file or after it gave it back: restoreSpool drops those).
    expect(held(spool)).toHaveLength(1);
    expect(spool).toContain(`${held(spool)[0]}.from`);

    expect(await restoreSpool(root)).toEqual([{ path: 'g/out/report.txt', restored: true }]);
    expect(readFileSync(join(root, 'g', 'out', 'report.txt'), 'utf8')).toBe(BODY);
    expect(readdirSync(join(root, SPOOL_DIR))).toEqual([]);
    // Nothing more to do the next time.
    expect(await restoreSpool(root)).toEqual([]);
  },
);

test(
  'a file the agent wrote at that name meanwhile stays; the held one is dropped',
  { timeout: 60_000 },
  async () => {
    const root = tempDir();
    mkdirSync(join(root, 'g'), { recursive: true });
    writeFileSync(join(root, 'g', 'report.txt'), BODY);
    await killHolding(root, 'g/report.txt');
    writeFileSync(join(root, 'g', 'report.txt'), 'written again\n');
    expect(await restoreSpool(root)).toEqual([{ path: 'g/report.txt', restored: true }]);
    expect(readFileSync(join(root, 'g', 'report.txt'), 'utf8')).toBe('written again\n');
    expect(readdirSync(join(root, SPOOL_DIR))).toEqual([]);
  },
);

test(
  'a place gone or swapped for a link: the file stays in the spool, nothing is written outside',
  { timeout: 60_000 },
  async () => {
    const root = tempDir();
    const outside = tempDir();
    mkdirSync(join(root, 'g', 'out'), { recursive: true });
    writeFileSync(join(root, 'g', 'out', 'report.txt'), BODY);
    await killHolding(root, 'g/out/report.txt');

    // The hostile agent swaps the directory for a link to somewhere else.
    rmSync(join(root, 'g', 'out'), { recursive: true });
    symlinkSync(outside, join(root, 'g', 'out'));
    const [linked] = await restoreSpool(root);
    expect(linked).toMatchObject({
      path: 'g/out/report.txt',
      restored: false,
      reason: 'g/out/report.txt: symlink',
    });
    expect(readdirSync(outside)).toEqual([]);

    // The folder removed: still left, and named.
    rmSync(join(root, 'g'), { recursive: true });
    const [gone] = await restoreSpool(root);
    expect(gone).toMatchObject({
      path: 'g/out/report.txt',
      restored: false,
      reason: 'g/out/report.txt: missing',
    });
    expect(held(readdirSync(join(root, SPOOL_DIR)))).toHaveLength(1);

    // Once the place is back, so is the file.
    mkdirSync(join(root, 'g', 'out'), { recursive: true });
    expect(await restoreSpool(root)).toEqual([{ path: 'g/out/report.txt', restored: true }]);
    expect(readFileSync(join(root, 'g', 'out', 'report.txt'), 'utf8')).toBe(BODY);
  },
);

test("gated's start puts a held file back before any run", { timeout: 60_000 }, async () => {
  const dir = tempDir();
  const groups = join(dir, 'groups');
  mkdirSync(join(groups, 'main'), { recursive: true });
  writeFileSync(join(groups, 'main', 'report.txt'), BODY);
  await killHolding(groups, 'main/report.txt');
  const g = await startTestGated({ env: { GATED_GROUPS_DIR: groups } });
  try {
    expect(readFileSync(join(groups, 'main', 'report.txt'), 'utf8')).toBe(BODY);
    expect(readdirSync(join(groups, SPOOL_DIR))).toEqual([]);
  } finally {
    await closeTestGated(g);
  }
});
