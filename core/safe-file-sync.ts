import {
  closeSync,
  constants,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  type Dirent,
  type Stats,
} from 'node:fs';
import { checkFile, componentsOf, FileRefused, isLink, O_PATH, refusalOf } from './safe-file.js';

const { O_RDONLY, O_NOFOLLOW, O_DIRECTORY } = constants;

// The synchronous twins of core/safe-file.ts, for readers that run inside a synchronous step (a group's
// configuration, read when a run starts or a chat command expands). Same walk, same checks, same refusals.

const atFd = (dir: number, name: string): string => `/proc/self/fd/${dir}/${name}`;

function openSyncOr(path: string, flags: number, rel: string): number {
  try {
    return openSync(path, flags);
  } catch (err) {
    throw refusalOf(err, rel);
  }
}

/** The directory `parts` below `root` opened (O_PATH) without following a link; the caller closes it. */
function openDirSync(root: string, parts: readonly string[], rel: string): number {
  let dir = openSyncOr(root, O_PATH | O_DIRECTORY, rel);
  try {
    for (const part of parts) {
      let next: number;
      try {
        next = openSync(atFd(dir, part), O_PATH | O_DIRECTORY | O_NOFOLLOW);
      } catch (err) {
        const link = (err as NodeJS.ErrnoException).code === 'ENOTDIR' && isLink(atFd(dir, part));
        throw link ? new FileRefused('symlink', rel) : refusalOf(err, rel);
      }
      closeSync(dir);
      dir = next;
    }
    return dir;
  } catch (err) {
    closeSync(dir);
    throw err;
  }
}

/**
 * What `rel` below `root` is, looked at without following a link at any component (its own type, as
 * lstat says it, on an O_PATH descriptor); null when it or a folder on the way does not exist.
 */
export function statInFolderSync(root: string, rel: string): Stats | null {
  const parts = componentsOf(rel);
  const name = parts.pop()!;
  let dir: number;
  try {
    dir = openDirSync(root, parts, rel);
  } catch (err) {
    if (err instanceof FileRefused && (err.reason === 'missing' || err.reason === 'not a directory'))
      return null;
    throw err;
  }
  try {
    const fd = openSync(atFd(dir, name), O_PATH | O_NOFOLLOW);
    try {
      return fstatSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw refusalOf(err, rel);
  } finally {
    closeSync(dir);
  }
}

/** Reads `rel` below `root` whole (at most `maxBytes`), synchronously, under every rule of openInFolder. */
export function readInFolderSync(root: string, rel: string, maxBytes: number): Buffer {
  const parts = componentsOf(rel);
  const name = parts.pop()!;
  const dir = openDirSync(root, parts, rel);
  let pathFd: number | undefined;
  let fd: number | undefined;
  try {
    pathFd = openSyncOr(atFd(dir, name), O_PATH | O_NOFOLLOW, rel);
    checkFile(fstatSync(pathFd), rel);
    fd = openSync(`/proc/self/fd/${pathFd}`, O_RDONLY);
    const stat = checkFile(fstatSync(fd), rel);
    if (stat.size > maxBytes) throw new FileRefused('too large', rel);
    const data = readFileSync(fd);
    if (data.length > maxBytes) throw new FileRefused('too large', rel);
    return data;
  } finally {
    if (fd !== undefined) closeSync(fd);
    if (pathFd !== undefined) closeSync(pathFd);
    closeSync(dir);
  }
}

/** The entries of the folder `rel` below `root`, opened without following a link at any component. */
export function listInFolderSync(root: string, rel: string): Dirent[] {
  const dir = openDirSync(root, componentsOf(rel), rel);
  try {
    return readdirSync(`/proc/self/fd/${dir}`, { withFileTypes: true });
  } finally {
    closeSync(dir);
  }
}
