import { FileRefused, listInFolderSync, readInFolderSync, statInFolderSync } from './safe-file.js';

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
