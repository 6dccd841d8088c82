import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { folderError } from './types.js';

/**
 * Where a group's folder lies on disk (docs/SECURITY.md, "Folders"). Every group's folder is a direct child
 * of GATED_GROUPS_DIR, nested groups included: `pub/c` lives at `<groups>/pub+c`, never inside `pub`'s
 * folder, so no agent can write a path that gated later resolves as another group's folder, a mount source
 * or an upload target. The parent/child relation of groups is the database's (their folder names), not the
 * disk's. The groups folder itself is the operator's and no agent writes into it: an agent sees only its
 * own folder, so the one component gated looks up below it is never one an agent could have changed.
 */

/**
 * The character that stands for `/` in the on-disk name of a nested group's folder. It is outside the
 * alphabet of group folders (FOLDER_RE), so the encoding is reversible and no two folders share a name, and
 * it is one character, so the name is no longer than the folder (at most 200 of a name's 255 bytes).
 */
export const NEST_MARK = '+';

/** `pub/c` → `pub+c`; a top-level folder is its own name. Throws for a malformed folder. */
export function diskNameOf(folder: string): string {
  const bad = folderError(folder);
  if (bad !== null) throw new Error(`'${folder}' is not a group folder: ${bad}`);
  return folder.replaceAll('/', NEST_MARK);
}

/** `pub+c` → `pub/c`; null for a name no group folder has. */
export function folderOfDiskName(name: string): string | null {
  const folder = name.replaceAll(NEST_MARK, '/');
  return folderError(folder) === null ? folder : null;
}

/** The path of a group's folder: `<groupsDir>/<disk name>`. */
export function groupDirOf(groupsDir: string, folder: string): string {
  return join(groupsDir, diskNameOf(folder));
}

/**
 * The same path with the groups folder's own links resolved (the operator's, trusted) and the group's
 * entry left as it is: what a container's mount source or a process's working directory is given.
 */
export function realGroupDirOf(groupsDir: string, folder: string): string {
  return join(realpathSync(groupsDir), diskNameOf(folder));
}

/** The group's folder is not a real folder directly inside the groups folder. */
export class GroupDirError extends Error {
  override readonly name = 'GroupDirError';
}

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

/** A group's folder, opened: `fd` (O_RDONLY | O_DIRECTORY) is the folder itself; close it when done. */
export interface OpenedGroupDir {
  /** Its path, the groups folder's links resolved: the same folder as `fd` as long as the layout holds. */
  path: string;
  fd: number;
  stat: Stats;
}

/**
 * Makes the folder at `groupDir` when missing (its parent, the groups folder, too) and opens it without
 * following a link at its own name: a link, a file or anything else there is refused with a
 * GroupDirError, never followed. Links above it (the groups folder's path) are the operator's and kept.
 */
export function openGroupDirSync(groupDir: string): OpenedGroupDir {
  const abs = resolve(groupDir);
  // Opened first and made only when missing: every run opens its folder, which is there nearly always, and
  // a mkdir of a folder that exists fails with an error Node builds with its stack (a run's start paid
  // two mkdirs, one thrown, and a realpath walking every component of the path).
  let fd = openNoFollow(abs, groupDir);
  if (fd === null) {
    mkdirSync(dirname(abs), { recursive: true });
    try {
      mkdirSync(abs, { mode: 0o755 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    fd = openNoFollow(abs, groupDir);
    if (fd === null) throw new GroupDirError(`group folder ${groupDir} vanished as it was made`);
  }
  try {
    // The groups folder's own links resolved (the operator's); the group's entry itself is never a link.
    const path = join(realpathSync.native(dirname(abs)), basename(abs));
    return { path, fd, stat: fstatSync(fd) };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** The folder at `abs` opened without following a link at its name; null when nothing is there. */
function openNoFollow(abs: string, groupDir: string): number | null {
  try {
    return openSync(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP' || code === 'ENOTDIR')
      throw new GroupDirError(`group folder ${groupDir} is not a folder (a link or a file is there)`);
    throw err;
  }
}

/**
 * Checks that `groupDir` is a real folder (no link at its name), making it when missing; returns its path
 * with the groups folder's links resolved. For a runtime that only needs the path (the process runtime's
 * working directory).
 */
export function checkGroupDirSync(groupDir: string): string {
  // One lstat where the folder is there (every run's start): the same answer as opening it without
  // following a link, without the open, fstat and close of a descriptor nobody keeps.
  const abs = resolve(groupDir);
  const st = lstatSync(abs, { throwIfNoEntry: false });
  if (st === undefined) {
    const dir = openGroupDirSync(groupDir);
    closeSync(dir.fd);
    return dir.path;
  }
  if (!st.isDirectory())
    throw new GroupDirError(`group folder ${groupDir} is not a folder (a link or a file is there)`);
  return join(realpathSync.native(dirname(abs)), basename(abs));
}
