import { randomBytes } from 'node:crypto';
import { constants, lstatSync, type Stats } from 'node:fs';
import {
  access,
  link,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  unlink,
  writeFile,
  type FileHandle,
} from 'node:fs/promises';
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
 * - a file with more than one name (a hard link to a file elsewhere) is refused too, on the descriptor that
 *   is read; a reader that sends the file on takes the entry into gated's spool first (openInFolder), so
 *   that a hard link cannot be raced past that check;
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
export const O_PATH = 0o10000000;
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

export function refusalOf(err: unknown, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return new FileRefused('symlink', path);
  if (code === 'ENOTDIR') return new FileRefused('not a directory', path);
  if (code === 'ENOENT') return new FileRefused('missing', path);
  return err;
}

export function isLink(path: string): boolean {
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

/**
 * The checks of a file: no link, a regular file, one name. Made twice: on the O_PATH descriptor, before
 * the file itself is opened (a FIFO or device never is), and on the descriptor that is then read, after
 * its open, so that what passed is exactly what is read, whatever the agent links or renames meanwhile (a
 * hard link made between the two is seen by the second). Returns the stat.
 */
export function checkFile(stat: Stats, rel: string): Stats {
  if (stat.isSymbolicLink()) throw new FileRefused('symlink', rel);
  if (!stat.isFile()) throw new FileRefused('not a regular file', rel);
  if (stat.nlink > 1) throw new FileRefused('hard link', rel);
  return stat;
}

/** A regular file of a group folder, opened for reading; close `handle` when done. */
export interface OpenedFile {
  handle: FileHandle;
  stat: Stats;
}

/**
 * Opens `rel` below `root` for reading, under every rule above; throws FileRefused with the reason. The
 * type is checked before the file is opened, so a FIFO never blocks and a device is never touched.
 *
 * `spool` (a directory of gated's own on the folder's filesystem that no agent can write, `spoolOf`)
 * closes the hard-link race: a descriptor's link count alone cannot tell a file of the agent's from a
 * decoy outside that the agent linked in and unlinked again around the check (the decoy then has one name,
 * outside). So the entry is first moved into the spool (one rename: the name the agent had is now gated's,
 * and no agent can add or remove it), opened and checked there, and put back: a link count of 1 then means
 * the spool's name is the file's only one, and nothing outside the folder names it. Readers that send a
 * file to someone (delivery, the web chat's file endpoint) pass one. While the entry is taken, the folder
 * has no file at that name (a look from the agent in that moment misses it), and a journal beside it in
 * the spool (`<name>.from`, the path below `root`) says where it goes back should gated stop before it is
 * put back: restoreSpool, at start.
 */
export async function openInFolder(root: string, rel: string, spool?: string): Promise<OpenedFile> {
  const parts = componentsOf(rel);
  const name = parts.pop()!;
  const dir = await openDir(root, parts, rel, false);
  try {
    // The entry as it is, checked without opening it; then, with a spool, the same entry taken.
    const first = await openChecked(at(dir, name), rel, spool !== undefined);
    if (spool === undefined || first.handle) return first as OpenedFile;
    const held = await open(spool, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    const tmp = `${randomBytes(8).toString('hex')}`;
    const journal = at(held, `${tmp}${JOURNAL}`);
    try {
      await writeFile(journal, rel, { flag: 'wx' });
      const taken = await rename(at(dir, name), at(held, tmp)).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          // A folder on another filesystem than its spool: the descriptor's checks are all there is.
          if (err.code === 'EXDEV') return false;
          throw refusalOf(err, rel);
        },
      );
      if (!taken) return (await openChecked(at(dir, name), rel, false)) as OpenedFile;
      try {
        return (await openChecked(at(held, tmp), rel, false)) as OpenedFile;
      } finally {
        await putBack(at(held, tmp), at(dir, name));
      }
    } finally {
      // The journal stays as long as the entry does (a put-back that failed is tried again at start).
      if (!(await exists(at(held, tmp)))) await unlink(journal).catch(() => undefined);
      await held.close().catch(() => undefined);
    }
  } finally {
    await dir.close().catch(() => undefined);
  }
}

/**
 * `path` checked on an O_PATH descriptor (no link, a regular file, one name), then, unless `checkOnly`,
 * opened through that descriptor and checked again on the descriptor that is read.
 */
async function openChecked(path: string, rel: string, checkOnly: boolean): Promise<Partial<OpenedFile>> {
  const pathFd = await open(path, O_PATH | O_NOFOLLOW).catch((err) => {
    throw refusalOf(err, rel);
  });
  try {
    const stat = checkFile(await pathFd.stat(), rel);
    if (checkOnly) return { stat };
    // Reopening the O_PATH descriptor's magic link opens exactly the inode just checked.
    const handle = await open(`/proc/self/fd/${pathFd.fd}`, O_RDONLY);
    try {
      return { handle, stat: checkFile(await handle.stat(), rel) };
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  } finally {
    await pathFd.close().catch(() => undefined);
  }
}

/**
 * Gives a taken entry back its name. Linked, not renamed, so that a file the agent wrote at that name
 * meanwhile stays (as it would have replaced this one); then the spool's name is removed.
 */
async function putBack(taken: string, name: string): Promise<void> {
  await link(taken, name).catch(async (err: NodeJS.ErrnoException) => {
    // A directory cannot be linked (it was swapped in after the first check): renamed back instead.
    if (err.code !== 'EEXIST') await rename(taken, name).catch(() => undefined);
  });
  await unlink(taken).catch(() => undefined);
}

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/** The journal of a taken entry, beside it in the spool: the path below the groups folder it came from. */
const JOURNAL = '.from';

/** What restoreSpool did with one entry a stopped gated left in the spool. */
export interface SpoolRestore {
  /** The entry's path below the groups folder. */
  path: string;
  /** Put back; or left in the spool (its place is gone or refused), with the reason. */
  restored: boolean;
  reason?: string;
}

/**
 * Puts back every entry a gated stopped (kill -9) while it held it in the spool of `groupsDir` (a file
 * taken by openInFolder and not yet given back), at the place its journal names, walked under the same
 * rules: a file the agent wrote at that name meanwhile stays, as in putBack. An entry whose place is gone
 * (its folder removed) or refused (a link in the path) stays in the spool with its journal, for the operator.
 * Nothing to do when there is no spool. Run at start, before any reader takes an entry.
 */
export async function restoreSpool(groupsDir: string): Promise<SpoolRestore[]> {
  const spool = join(groupsDir, SPOOL_DIR);
  const names = await readdir(spool).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  const done: SpoolRestore[] = [];
  for (const entry of names.filter((n) => n.endsWith(JOURNAL))) {
    const journal = join(spool, entry);
    const taken = join(spool, entry.slice(0, -JOURNAL.length));
    const path = await readFile(journal, 'utf8');
    if (!(await exists(taken))) {
      await unlink(journal);
      continue;
    }
    try {
      const parts = componentsOf(path);
      const name = parts.pop()!;
      const dir = await openDir(groupsDir, parts, path, false);
      try {
        await putBack(taken, at(dir, name));
      } finally {
        await dir.close().catch(() => undefined);
      }
      if (await exists(taken)) throw new Error('it could not be put back');
      await unlink(journal);
      done.push({ path, restored: true });
    } catch (err) {
      done.push({ path, restored: false, reason: err instanceof Error ? err.message : String(err) });
    }
  }
  return done;
}

/** The spool of a groups folder (openInFolder): `.gated-spool` in it, which no group folder name can be. */
export const SPOOL_DIR = '.gated-spool';

/**
 * The spool of the groups folder `groupsDir` (its real path), made private to gated's user when missing;
 * a spool that is not a directory of gated's own that only gated can write is refused (throws).
 */
export async function spoolOf(groupsDir: string): Promise<string> {
  const spool = join(groupsDir, SPOOL_DIR);
  await mkdir(spool, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
  const st = lstatSync(spool);
  if (!st.isDirectory() || st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0)
    throw new Error(`${spool} is not a directory of gated's own that only gated can write`);
  return spool;
}

/** Reads `rel` below `root` whole (at most `maxBytes`), under every rule above. */
export async function readInFolder(
  root: string,
  rel: string,
  maxBytes: number,
  spool?: string,
): Promise<Buffer> {
  const { handle, stat } = await openInFolder(root, rel, spool);
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
