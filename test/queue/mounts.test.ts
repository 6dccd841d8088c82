import { closeSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MountError, openWorkspace, parseMountList, validateMounts } from '../../queue/runtime/mounts.js';
import { tempDir } from '../helpers/db.js';

function layout() {
  const root = tempDir('gated-mounts-');
  const allowed = join(root, 'allowed');
  const outside = join(root, 'outside');
  mkdirSync(join(allowed, 'data'), { recursive: true });
  mkdirSync(outside);
  symlinkSync(outside, join(allowed, 'escape'));
  symlinkSync(join(allowed, 'data'), join(root, 'link-to-data'));
  return { root, allowed, outside };
}

describe('mount validation', () => {
  it('accepts paths inside an allowed root, read-only unless asked, under /mnt', () => {
    const { allowed } = layout();
    expect(
      validateMounts(
        [{ path: join(allowed, 'data') }, { path: allowed, target: '/mnt/all/', rw: true }],
        [allowed],
      ),
    ).toEqual([
      { source: join(allowed, 'data'), target: '/mnt/data', readOnly: true },
      { source: allowed, target: '/mnt/all', readOnly: false },
    ]);
  });

  it('follows symlinks before checking: a link out of an allowed root is refused, a link into one is fine', () => {
    const { root, allowed } = layout();
    expect(() => validateMounts([{ path: join(allowed, 'escape') }], [allowed])).toThrow(MountError);
    expect(validateMounts([{ path: join(root, 'link-to-data') }], [allowed])).toEqual([
      { source: join(allowed, 'data'), target: '/mnt/data', readOnly: true },
    ]);
  });

  it('refuses relative paths, `..`, missing paths, unlisted roots and bad targets', () => {
    const { allowed, outside } = layout();
    const refuse = (path: string, target?: string, roots = [allowed]) =>
      expect(() => validateMounts([{ path, ...(target ? { target } : {}) }], roots)).toThrow(MountError);
    refuse('allowed/data');
    refuse(`${allowed}/data/../data`);
    refuse(join(allowed, 'missing'));
    refuse(outside);
    refuse(join(allowed, 'data'), undefined, []);
    refuse(join(allowed, 'data'), '/etc');
    refuse(join(allowed, 'data'), '/workspace/x');
    refuse(join(allowed, 'data'), '/mnt/../etc');
    refuse(join(allowed, 'data'), 'mnt/x');
    expect(() =>
      validateMounts([{ path: join(allowed, 'data') }, { path: join(allowed, 'data') }], [allowed]),
    ).toThrow(/used twice/);
  });

  it('opens a group folder only as a real folder directly inside the groups root, never through a link', () => {
    const { root, allowed, outside } = layout();
    mkdirSync(join(allowed, 'g1'));
    const opened = openWorkspace(allowed, join(allowed, 'g1'));
    expect(opened.path).toBe(join(allowed, 'g1'));
    closeSync(opened.fd);
    // A link at the group's own name (`escape` points outside), and a folder below another group's.
    expect(() => openWorkspace(allowed, join(allowed, 'escape'))).toThrow(/not a folder/);
    expect(() => openWorkspace(allowed, join(allowed, 'g1', 'c'))).toThrow(/not directly inside/);
    expect(() => openWorkspace(join(root, 'link-to-data'), outside)).toThrow(MountError);
    // Nothing was made through the link, nor inside the other group's folder.
    expect(readdirSync(outside)).toEqual([]);
    expect(readdirSync(join(allowed, 'g1'))).toEqual([]);
  });

  it('reads registered_groups.mounts', () => {
    expect(parseMountList(null)).toEqual([]);
    expect(parseMountList('["/a", {"path": "/b", "target": "/mnt/b", "rw": true}]')).toEqual([
      { path: '/a' },
      { path: '/b', target: '/mnt/b', rw: true },
    ]);
    expect(() => parseMountList('{"path": "/a"}')).toThrow(MountError);
    expect(() => parseMountList('[1]')).toThrow(MountError);
    expect(() => parseMountList('nope')).toThrow(MountError);
  });
});
