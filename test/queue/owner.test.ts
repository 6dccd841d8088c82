/**
 * Root gated handing a group's folder to the agent user (queue/runtime/owner.ts): only the folders and
 * files checked on their own descriptors change owner; a link (to a folder or a file outside), a hard link
 * to a file elsewhere and a FIFO are left as they are, and nothing outside the folder changes owner.
 */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { chownTreeAt } from '../../queue/runtime/owner.js';
import { tempDir } from '../helpers/db.js';

describe.runIf(process.getuid?.() === 0)('chown of a group folder under root', () => {
  test('changes the owner of what is inside and nothing reached through a link', () => {
    const root = tempDir();
    const g = join(root, 'g');
    const outside = join(root, 'outside');
    mkdirSync(join(g, 'sub', 'deeper'), { recursive: true });
    mkdirSync(join(outside, 'dir'), { recursive: true });
    writeFileSync(join(g, 'sub', 'deeper', 'f.txt'), 'inside\n', { mode: 0o600 });
    writeFileSync(join(outside, 'secret'), 'outside\n', { mode: 0o600 });
    symlinkSync(outside, join(g, 'sub', 'to-outside'));
    symlinkSync(join(outside, 'secret'), join(g, 'secret-link'));
    linkSync(join(outside, 'secret'), join(g, 'hard'));
    execFileSync('mkfifo', [join(g, 'fifo')]);
    const fd = openSync(g, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      chownTreeAt(fd, 1000, 1001);
    } finally {
      closeSync(fd);
    }
    const owner = (p: string) => `${lstatSync(p).uid}:${lstatSync(p).gid}`;
    for (const p of ['', 'sub', 'sub/deeper', 'sub/deeper/f.txt'])
      expect(owner(join(g, p))).toBe('1000:1001');
    for (const p of ['sub/to-outside', 'secret-link', 'hard', 'fifo']) expect(owner(join(g, p))).toBe('0:0');
    for (const p of ['', 'dir', 'secret']) expect(owner(join(outside, p))).toBe('0:0');
  });
});
