import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Reading the operator's per-group configuration (docs/AGENTS.md, "Each group its own agent") without
 * following a link: every path component below the configuration root is looked at with lstat and refused
 * when it is a symbolic link, and the file itself is opened with O_NOFOLLOW and must be a regular file (a
 * FIFO, socket or device is refused after an open that cannot block). This is the one place that reads
 * those files, so that a shared safe-file module can replace it without touching its callers.
 */

/** Largest configuration file read (an instruction file, a skill, a command, mcp.json). */
export const MAX_CONFIG_FILE_BYTES = 256 * 1024;

/** A configuration file or folder that exists but cannot be used, and why (never fatal). */
export class ConfigFileError extends Error {
  override readonly name = 'ConfigFileError';
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * Checks the components of `rel` below `root`: none may be a symbolic link, all but the last must be
 * folders. Returns the last one's kind, or null when something on the way does not exist.
 */
function walk(root: string, rel: string): 'file' | 'dir' | 'other' | null {
  const parts = rel.split('/').filter((p) => p !== '');
  let path = root;
  let kind: 'file' | 'dir' | 'other' = 'dir';
  for (const [i, part] of parts.entries()) {
    path = join(path, part);
    let st;
    try {
      st = lstatSync(path);
    } catch (err) {
      if (isMissing(err)) return null;
      throw new ConfigFileError(`${rel}: ${(err as Error).message}`);
    }
    if (st.isSymbolicLink())
      throw new ConfigFileError(`${parts.slice(0, i + 1).join('/')} is a symbolic link`);
    kind = st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
    if (i < parts.length - 1 && kind !== 'dir') return null;
  }
  return kind;
}

/**
 * The text of `root/rel`, or null when it does not exist. Throws ConfigFileError for a link, a folder, a
 * FIFO or device, a file over MAX_CONFIG_FILE_BYTES, or one that is not UTF-8 text.
 */
export function readConfigFile(root: string, rel: string): string | null {
  const kind = walk(root, rel);
  if (kind === null) return null;
  if (kind !== 'file') throw new ConfigFileError(`${rel} is not a regular file`);
  let fd: number;
  try {
    fd = openSync(join(root, rel), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (isMissing(err)) return null;
    throw new ConfigFileError(`${rel}: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new ConfigFileError(`${rel} is not a regular file`);
    if (st.size > MAX_CONFIG_FILE_BYTES)
      throw new ConfigFileError(`${rel} is larger than ${MAX_CONFIG_FILE_BYTES} bytes`);
    const buf = Buffer.alloc(st.size);
    let at = 0;
    while (at < buf.length) {
      const n = readSync(fd, buf, at, buf.length - at, at);
      if (n === 0) break;
      at += n;
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, at));
    } catch {
      throw new ConfigFileError(`${rel} is not UTF-8 text`);
    }
  } finally {
    closeSync(fd);
  }
}

/** True when `root/rel` is a folder (no link on the way); false when absent. Throws for a link. */
export function isConfigDir(root: string, rel: string): boolean {
  const kind = walk(root, rel);
  if (kind === null) return false;
  if (kind !== 'dir') throw new ConfigFileError(`${rel} is not a folder`);
  return true;
}

/** The entries of folder `root/rel` (names and whether each is a folder, a file or a link), sorted. */
export function listConfigDir(
  root: string,
  rel: string,
): Array<{ name: string; kind: 'dir' | 'file' | 'other' }> {
  if (!isConfigDir(root, rel)) return [];
  return readdirSync(join(root, rel), { withFileTypes: true })
    .map((e) => ({
      name: e.name,
      kind: e.isDirectory() ? ('dir' as const) : e.isFile() ? ('file' as const) : ('other' as const),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}
