/**
 * Where a group's folder lies on disk (core/group-dir.ts): every group, nested or not, a direct child of
 * the groups folder under a name that is reversible and shared by no other folder; opened only as a real
 * folder, never through a link at its name.
 */
import { closeSync, fstatSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import {
  checkGroupDirSync,
  diskNameOf,
  folderOfDiskName,
  GroupDirError,
  groupDirOf,
  openGroupDirSync,
} from '../../core/group-dir.js';
import { tempDir } from '../helpers/db.js';

describe('group folders on disk', () => {
  test('a nested folder is a sibling of its parent, under a name that reverses to it and to nothing else', () => {
    expect(diskNameOf('pub')).toBe('pub');
    expect(diskNameOf('pub/c')).toBe('pub+c');
    expect(diskNameOf('krons/content/deep')).toBe('krons+content+deep');
    expect(groupDirOf('/g', 'pub/c')).toBe('/g/pub+c');
    const folders = ['a', 'a/b', 'a-b', 'a_b', 'ab', 'a/b/c', 'a/bc', 'ab/c', 'x'.repeat(64) + '/y'];
    const names = folders.map(diskNameOf);
    expect(new Set(names).size).toBe(folders.length);
    expect(names.every((n) => !n.includes('/') && Buffer.byteLength(n) <= 255)).toBe(true);
    expect(names.map(folderOfDiskName)).toEqual(folders);
    for (const bad of ['..', 'a/../b', '/a', 'A', 'a+b', '']) expect(() => diskNameOf(bad)).toThrow();
    for (const stray of ['..', '.home', 'a++b', '+a', 'a+', 'A+b'])
      expect(folderOfDiskName(stray)).toBeNull();
  });

  test('a folder is made when missing and opened only as itself: a link or a file at its name is refused', () => {
    const groups = join(tempDir(), 'groups');
    const outside = tempDir();
    const made = openGroupDirSync(groupDirOf(groups, 'pub/c'));
    expect(made.path).toBe(join(groups, 'pub+c'));
    expect(fstatSync(made.fd).isDirectory()).toBe(true);
    closeSync(made.fd);
    symlinkSync(outside, join(groups, 'evil'));
    symlinkSync('pub+c', join(groups, 'alias'));
    writeFileSync(join(groups, 'file'), 'x');
    for (const name of ['evil', 'alias', 'file'])
      expect(() => checkGroupDirSync(join(groups, name))).toThrow(GroupDirError);
    expect(readdirSync(outside)).toEqual([]);
    mkdirSync(join(groups, 'real'));
    expect(checkGroupDirSync(join(groups, 'real'))).toBe(join(groups, 'real'));
    // Missing: made, as openGroupDirSync makes it; the groups folder's own link is resolved either way.
    symlinkSync(groups, join(outside, 'link'));
    expect(checkGroupDirSync(join(outside, 'link', 'new'))).toBe(join(groups, 'new'));
    expect(checkGroupDirSync(join(outside, 'link', 'new'))).toBe(join(groups, 'new'));
  });
});
