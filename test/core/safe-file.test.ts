/** core/safe-file.ts on a real filesystem: every refusal by its name, and writes that replace planted entries. */
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { checkInFolderSync, FileRefused, readInFolder, writeInFolder } from '../../core/safe-file.js';
import { tempDir } from '../helpers/db.js';

function tree() {
  const root = tempDir('gated-safe-');
  const outside = tempDir('gated-safe-out-');
  writeFileSync(join(outside, 'secret'), 'secret');
  mkdirSync(join(root, 'out'));
  writeFileSync(join(root, 'out', 'ok.txt'), 'ok');
  symlinkSync(join(outside, 'secret'), join(root, 'out', 'link'));
  symlinkSync(outside, join(root, 'dirlink'));
  execFileSync('mkfifo', [join(root, 'out', 'fifo')]);
  linkSync(join(outside, 'secret'), join(root, 'out', 'hard'));
  return { root, outside };
}

const reasonOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'read',
    (e: unknown) => (e instanceof FileRefused ? e.reason : String(e)),
  );

test('reads only regular files reached through no link, and names why anything else is refused', async () => {
  const { root } = tree();
  expect((await readInFolder(root, 'out/ok.txt', 10)).toString()).toBe('ok');
  const cases: Array<[string, string]> = [
    ['out/link', 'symlink'],
    ['dirlink/secret', 'symlink'],
    ['out/fifo', 'not a regular file'],
    ['out', 'not a regular file'],
    ['out/hard', 'hard link'],
    ['out/none', 'missing'],
    ['../x', 'outside the folder'],
    ['/etc/passwd', 'outside the folder'],
    ['out/ok.txt/x', 'not a directory'],
  ];
  for (const [rel, reason] of cases) {
    expect([rel, await reasonOf(readInFolder(root, rel, 10))]).toEqual([rel, reason]);
    expect([rel, await reasonOf(Promise.resolve().then(() => checkInFolderSync(root, rel)))]).toEqual([
      rel,
      reason,
    ]);
  }
  expect(await reasonOf(readInFolder(root, 'out/ok.txt', 1))).toBe('too large');
});

test('writes replace a planted link or FIFO as an entry and refuse a linked directory', async () => {
  const { root, outside } = tree();
  await writeInFolder(root, 'out/link', Buffer.from('mine'));
  await writeInFolder(root, 'out/fifo', Buffer.from('mine too'));
  await writeInFolder(root, 'inbox/7/0-a.txt', Buffer.from('new'));
  expect(readFileSync(join(root, 'out/link'), 'utf8')).toBe('mine');
  expect(readFileSync(join(root, 'out/fifo'), 'utf8')).toBe('mine too');
  expect(readFileSync(join(root, 'inbox/7/0-a.txt'), 'utf8')).toBe('new');
  expect(await reasonOf(writeInFolder(root, 'dirlink/secret', Buffer.from('x')))).toBe('symlink');
  expect(await reasonOf(writeInFolder(root, 'out', Buffer.from('x')))).toBe('not a regular file');
  expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('secret');
});
