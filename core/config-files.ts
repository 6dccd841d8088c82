import { lstatSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { FileRefused } from './safe-file.js';
import { listInFolderSync, readInFolderSync, statInFolderSync } from './safe-file-sync.js';

/**
 * Reading the operator's per-group configuration (docs/AGENTS.md, "Each group its own agent") through the
 * one safe-file module (core/safe-file.ts), under the rules of every file of a group's folder (docs/SECURITY.md): no link is followed at any component, only a regular file with one name is read, and a FIFO,
 * socket or device is never opened. This is the one place that reads those files.
 */

/** Largest configuration file read (an instruction file, a skill, a command, mcp.json). */
export const MAX_CONFIG_FILE_BYTES = 256 * 1024;

/** A configuration file or folder that exists but cannot be used, and why (never fatal). */
export class ConfigFileError extends Error {
  override readonly name = 'ConfigFileError';
}

/** A refusal of the safe-file module as this module's error, naming the file. */
function configError(err: unknown, rel: string): ConfigFileError {
  if (!(err instanceof FileRefused)) return new ConfigFileError(`${rel}: ${(err as Error).message}`);
  switch (err.reason) {
    case 'symlink':
      return new ConfigFileError(`${rel} is a symbolic link`);
    case 'hard link':
      return new ConfigFileError(`${rel} is a hard link (a file with more than one name)`);
    case 'too large':
      return new ConfigFileError(`${rel} is larger than ${MAX_CONFIG_FILE_BYTES} bytes`);
    default:
      return new ConfigFileError(
        `${rel} is ${err.reason === 'outside the folder' ? 'outside the folder' : 'not a regular file'}`,
      );
  }
}

/** True for a refusal that only says the file is not there (missing, or a file where a folder would be). */
function isAbsent(err: unknown): boolean {
  return err instanceof FileRefused && (err.reason === 'missing' || err.reason === 'not a directory');
}

/**
 * The text of `root/rel`, or null when it does not exist. Throws ConfigFileError for a link, a folder, a
 * FIFO or device, a file over MAX_CONFIG_FILE_BYTES, or one that is not UTF-8 text.
 */
export function readConfigFile(root: string, rel: string): string | null {
  looking?.add(rel);
  let buf: Buffer;
  try {
    buf = readInFolderSync(root, rel, MAX_CONFIG_FILE_BYTES);
  } catch (err) {
    if (isAbsent(err)) return null;
    throw configError(err, rel);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    throw new ConfigFileError(`${rel} is not UTF-8 text`);
  }
}

/** True when `root/rel` is a folder (no link on the way); false when absent. Throws for a link. */
export function isConfigDir(root: string, rel: string): boolean {
  looking?.add(rel);
  let st: ReturnType<typeof statInFolderSync>;
  try {
    st = statInFolderSync(root, rel);
  } catch (err) {
    throw configError(err, rel);
  }
  if (st === null) return false;
  if (st.isSymbolicLink()) throw new ConfigFileError(`${rel} is a symbolic link`);
  if (!st.isDirectory()) throw new ConfigFileError(`${rel} is not a folder`);
  return true;
}

/** The entries of folder `root/rel` (names and whether each is a folder, a file or a link), sorted. */
export function listConfigDir(
  root: string,
  rel: string,
): Array<{ name: string; kind: 'dir' | 'file' | 'other' }> {
  looking?.add(rel);
  if (!isConfigDir(root, rel)) return [];
  let entries: ReturnType<typeof listInFolderSync>;
  try {
    entries = listInFolderSync(root, rel);
  } catch (err) {
    throw configError(err, rel);
  }
  return entries
    .map((e) => ({
      name: e.name,
      kind: e.isDirectory() ? ('dir' as const) : e.isFile() ? ('file' as const) : ('other' as const),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

// The paths the readers above were asked about while `readTracked` runs (synchronous: one at a time).
let looking: Set<string> | null = null;

/**
 * How long after a change a file's timestamps can still be equal to those of the next change: coarser
 * than any local filesystem's clock (2 s on FAT). A read of files changed this recently is not trusted to
 * be told apart from their next change.
 */
const RACY_MS = 2000;

/** What one path looked like (inode, type, links, size, times), or why nothing was there. */
interface Stamp {
  key: string;
  /** Its ctime; null when nothing was there. */
  ctimeMs: number | null;
}

function stampOf(path: string, follow: boolean): Stamp {
  let st: Stats | undefined;
  try {
    st = follow ? statSync(path, { throwIfNoEntry: false }) : lstatSync(path, { throwIfNoEntry: false });
  } catch (err) {
    // ENOTDIR (a file where a folder was), EACCES: nothing to see there or below, and stamped as such.
    return { key: `error ${(err as NodeJS.ErrnoException).code ?? ''}`, ctimeMs: null };
  }
  if (st === undefined) return { key: 'absent', ctimeMs: null };
  return {
    key: `${st.ino} ${st.mode} ${st.nlink} ${st.size} ${st.mtimeMs} ${st.ctimeMs}`,
    ctimeMs: st.ctimeMs,
  };
}

/**
 * The stamps of every path a read looked at, and of the folders above each: enough to tell later that
 * nothing of it changed. A file's content changes its times and size; a file or folder made, removed,
 * renamed or replaced by a link changes its parent folder's. What cannot be told apart (a change within
 * RACY_MS of the read) makes the snapshot `settled: false`, and it is not to be kept.
 */
export class ConfigSnapshot {
  private constructor(
    private readonly root: string,
    /** Shallowest first: a folder before what lies in it. */
    private readonly paths: readonly string[],
    private readonly stamps: readonly Stamp[],
    readonly settled: boolean,
  ) {}

  static take(root: string, looked: Iterable<string>, readAt: number): ConfigSnapshot {
    const all = new Set<string>(['']);
    for (const rel of looked) {
      const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
      for (let i = 1; i <= parts.length; i++) all.add(parts.slice(0, i).join('/'));
    }
    const paths = [...all].sort((a, b) => depth(a) - depth(b) || (a < b ? -1 : a > b ? 1 : 0));
    // Below a path with nothing there, nothing is there either: stamped without asking.
    const gone: string[] = [];
    const stamps = paths.map((rel) => {
      if (below(rel, gone)) return { key: 'absent', ctimeMs: null };
      const stamp = stampOf(join(root, rel), rel === '');
      if (stamp.ctimeMs === null) gone.push(rel);
      return stamp;
    });
    // ctime, not mtime: it cannot be set back, and moves with every change of content, name or mode.
    const settled = stamps.every((s) => s.ctimeMs === null || s.ctimeMs < readAt - RACY_MS);
    return new ConfigSnapshot(root, paths, stamps, settled);
  }

  /**
   * True when every path still looks as it did. Below a folder that was and still is absent nothing is
   * looked at again: a path there can only appear with its folder.
   */
  unchanged(): boolean {
    // A read tracked around this check (a snapshot of a snapshot) looked at the same paths.
    if (looking) for (const rel of this.paths) if (rel !== '') looking.add(rel);
    const gone: string[] = [];
    for (let i = 0; i < this.paths.length; i++) {
      const rel = this.paths[i]!;
      if (below(rel, gone)) continue;
      const now = stampOf(join(this.root, rel), rel === '');
      if (now.key !== this.stamps[i]!.key) return false;
      if (now.ctimeMs === null) gone.push(rel);
    }
    return true;
  }
}

/** True when `rel` lies below one of `folders` ('' is the root). */
function below(rel: string, folders: readonly string[]): boolean {
  return folders.some((g) => g === '' || rel.startsWith(`${g}/`));
}

function depth(rel: string): number {
  return rel === '' ? 0 : rel.split('/').length;
}

/**
 * Runs `read`, a synchronous reader of configuration files under `root` through this module, and stamps
 * every path it looked at (`ConfigSnapshot`), so that a cache can tell when its result is still true.
 * `readAt`: when the read started (tests pretend it was later, to see the stamps alone at work).
 */
export function readTracked<T>(
  root: string,
  read: () => T,
  readAt = Date.now(),
): { value: T; snapshot: ConfigSnapshot } {
  const outer = looking;
  const seen = new Set<string>();
  looking = seen;
  try {
    const value = read();
    return { value, snapshot: ConfigSnapshot.take(root, seen, readAt) };
  } finally {
    looking = outer;
    if (outer) for (const p of seen) outer.add(p);
  }
}
