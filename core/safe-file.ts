import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  type Dirent,
  type Stats,
} from 'node:fs';
import { mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { isAbsolute, join, relative } from 'node:path';

/**
 * Files inside a group's folder, which its agent controls (docs/SECURITY.md, "Files"). The agent can plant a
 * symlink, a FIFO or a device at any path, and swap one in at any moment, so every read and write of a
 * group folder goes through here and is checked when it happens, not earlier:
 *
 * - the path is walked one component at a time, each directory opened with O_NOFOLLOW and the next name
 *   looked up through that descriptor (`/proc/self/fd/<fd>/<name>`, Linux's equivalent of openat), so a
 *   symlink at any component is refused instead of followed, and a directory renamed meanwhile cannot
 *   redirect the walk;
 * - the last component is first opened with O_PATH, which never opens the file itself: its type is checked
 *   with fstat on that descriptor, and only a regular file is then reopened for reading through it. A FIFO,
 *   socket or device is therefore never opened, and what is read is the inode that was checked;
 * - a file with more than one name (a hard link to a file elsewhere) is refused too;
 * - writes go to a fresh name created with O_EXCL|O_NOFOLLOW and are renamed into place inside the same
 *   opened directory, so a link planted at the target is replaced, never written through.
 */

/** Why a file of a group folder was refused: a short name, the same in logs, notes and tests. */
export type RefusalReason =
  | 'outside the folder'
  | 'symlink'
  | 'not a regular file'
  | 'not a directory'
  | 'hard link'
  | 'missing'
  | 'too large';

/** A file of a group folder that may not be read or written; `reason` says why. */
export class FileRefused extends Error {
  override readonly name = 'FileRefused';
  constructor(
    readonly reason: RefusalReason,
    readonly path: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

// O_PATH is Linux's "a descriptor for the name, the file itself not opened"; Node does not export it.
const O_PATH = 0o10000000;
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = constants;

const at = (dir: FileHandle, name: string): string => `/proc/self/fd/${dir.fd}/${name}`;

/**
 * The components of `rel`, a path relative to a folder. Absolute paths, `..` and NUL bytes are refused:
 * nothing is resolved by name outside the walk.
 */
export function componentsOf(rel: string): string[] {
  if (rel === '' || isAbsolute(rel) || rel.includes('\0')) throw new FileRefused('outside the folder', rel);
  const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.length === 0 || parts.includes('..')) throw new FileRefused('outside the folder', rel);
  return parts;
}

/** `abs` as a path relative to `root`, or a refusal when it does not lie below it. */
export function relativeInside(root: string, abs: string): string {
  const rel = relative(root, abs);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) throw new FileRefused('outside the folder', abs);
  return rel;
}

function refusalOf(err: unknown, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return new FileRefused('symlink', path);
  if (code === 'ENOTDIR') return new FileRefused('not a directory', path);
  if (code === 'ENOENT') return new FileRefused('missing', path);
  return err;
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Opens the directory `parts` below `root` (the operator's folder, trusted as given) without following a
 * link at any component; `create` makes missing directories on the way. The caller closes the handle.
 */
async function openDir(root: string, parts: readonly string[], rel: string, create: boolean) {
  let dir = await open(root, O_PATH | O_DIRECTORY).catch((err) => {
    throw refusalOf(err, rel);
  });
  try {
    for (const part of parts) {
      if (create) {
        await mkdir(at(dir, part)).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
      }
      const here = dir;
      const next = await open(at(here, part), O_PATH | O_DIRECTORY | O_NOFOLLOW).catch((err) => {
        // O_DIRECTORY answers ENOTDIR for a link too: say which it was.
        const link = (err as NodeJS.ErrnoException).code === 'ENOTDIR' && isLink(at(here, part));
        throw link ? new FileRefused('symlink', rel) : refusalOf(err, rel);
      });
      await dir.close();
      dir = next;
    }
    return dir;
  } catch (err) {
    await dir.close().catch(() => undefined);
    throw err;
  }
}

/** A regular file of a group folder, opened for reading; close `handle` when done. */
export interface OpenedFile {
  handle: FileHandle;
  stat: Stats;
}

/**
 * Opens `rel` below `root` for reading, under every rule above; throws FileRefused with the reason. The
 * type is checked before the file is opened, so a FIFO never blocks and a device is never touched.
 */
export async function openInFolder(root: string, rel: string): Promise<OpenedFile> {
  const parts = componentsOf(rel);
  const name = parts.pop()!;
  const dir = await openDir(root, parts, rel, false);
  let pathFd: FileHandle | undefined;
  try {
    pathFd = await open(at(dir, name), O_PATH | O_NOFOLLOW).catch((err) => {
      throw refusalOf(err, rel);
    });
    const stat = await pathFd.stat();
    if (stat.isSymbolicLink()) throw new FileRefused('symlink', rel);
    if (!stat.isFile()) throw new FileRefused('not a regular file', rel);
    if (stat.nlink > 1) throw new FileRefused('hard link', rel);
    // Reopening the O_PATH descriptor's magic link opens exactly the inode just checked.
    const handle = await open(`/proc/self/fd/${pathFd.fd}`, O_RDONLY);
    return { handle, stat };
  } finally {
    await pathFd?.close().catch(() => undefined);
    await dir.close().catch(() => undefined);
  }
}

/** Reads `rel` below `root` whole (at most `maxBytes`), under every rule above. */
export async function readInFolder(root: string, rel: string, maxBytes: number): Promise<Buffer> {
  const { handle, stat } = await openInFolder(root, rel);
  try {
    if (stat.size > maxBytes) throw new FileRefused('too large', rel);
    const data = await handle.readFile();
    if (data.length > maxBytes) throw new FileRefused('too large', rel);
    return data;
  } finally {
    await handle.close();
  }
}

/**
 * Writes `data` to `rel` below `root`, making the directories on the way. The bytes go to a fresh hidden
 * name first and are renamed into place, so an agent never reads half a file and whatever was planted at
 * `rel` (a link, a FIFO) is replaced as an entry, never opened. A directory at `rel` is refused.
 */
export async function writeInFolder(root: string, rel: string, data: Uint8Array): Promise<void> {
  const parts = componentsOf(rel);
  const name = parts.pop()!;
  // The group's folder itself is the operator's: it may not exist yet on a group's first file.
  await mkdir(root, { recursive: true });
  const dir = await openDir(root, parts, rel, true);
  const tmp = `.${randomBytes(6).toString('hex')}.part`;
  try {
    const fh = await open(at(dir, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o666);
    try {
      await fh.writeFile(data);
    } finally {
      await fh.close();
    }
    await rename(at(dir, tmp), at(dir, name)).catch(async (err: NodeJS.ErrnoException) => {
      await unlink(at(dir, tmp)).catch(() => undefined);
      if (err.code === 'EISDIR' || err.code === 'ENOTEMPTY' || err.code === 'EEXIST')
        throw new FileRefused('not a regular file', rel);
      throw err;
    });
  } finally {
    await dir.close().catch(() => undefined);
  }
}

/**
 * The same rules, checked now and synchronously, without opening anything: every component of `rel`
 * below `root` must exist and be no link, the last one a regular file with one name. For the early answer
 * when a block names a file; what counts is the check made again when the file is read.
 */
export function checkInFolderSync(root: string, rel: string): void {
  const parts = componentsOf(rel);
  let path = root;
  parts.forEach((part, i) => {
    path = join(path, part);
    let st: Stats;
    try {
      st = lstatSync(path);
    } catch (err) {
      throw refusalOf(err, rel);
    }
    if (st.isSymbolicLink()) throw new FileRefused('symlink', rel);
    const last = i === parts.length - 1;
    if (!last && !st.isDirectory()) throw new FileRefused('not a directory', rel);
    if (last && !st.isFile()) throw new FileRefused('not a regular file', rel);
    if (last && st.nlink > 1) throw new FileRefused('hard link', rel);
  });
}

// The synchronous twins, for readers that run inside a synchronous step (a group's configuration, read
// when a run starts or a chat command expands). Same walk, same checks, same refusals.

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
    const stat = fstatSync(pathFd);
    if (stat.isSymbolicLink()) throw new FileRefused('symlink', rel);
    if (!stat.isFile()) throw new FileRefused('not a regular file', rel);
    if (stat.nlink > 1) throw new FileRefused('hard link', rel);
    if (stat.size > maxBytes) throw new FileRefused('too large', rel);
    fd = openSync(`/proc/self/fd/${pathFd}`, O_RDONLY);
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
