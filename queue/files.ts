import { realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { mimeOf, safeFileName } from '../core/files.js';
import { checkInFolderSync, FileRefused, relativeInside } from '../core/safe-file.js';
import type { ResolvedFile } from '../store/outbound-files.js';
import { WORKSPACE } from './runtime/mounts.js';

/** Most files one block may send; more are refused (a runaway agent must not flood a chat). */
export const MAX_FILES_PER_BLOCK = 10;
/** Longest path a block may name (Linux's PATH_MAX); a longer one is refused and stored cut short. */
export const MAX_PATH_CHARS = 4096;

/**
 * Checks the files a block names against the group's folder (core/safe-file.ts). A path is taken relative
 * to the folder (a container's `/workspace/…` is the folder too; another absolute path must lie below the
 * folder's real path); no component may be a symlink and the file must be a regular one: `../x`,
 * `/etc/passwd`, a link (wherever it points), a FIFO and anything missing are refused with a reason. This
 * is the early answer; delivery checks the file again when it reads it.
 */
export function resolveFiles(groupDir: string, paths: readonly string[]): ResolvedFile[] {
  // Most blocks name no file: then the folder's real path (an lstat per component) is not looked up.
  if (paths.length === 0) return [];
  // The groups folder's links are the operator's and resolved; the group's own entry never is.
  let root: string;
  try {
    root = join(realpathSync(dirname(groupDir)), basename(groupDir));
  } catch {
    root = resolve(groupDir);
  }
  // One refused entry stands for every file past the bound: a block naming 100,000 stores 11 rows.
  return paths.slice(0, MAX_FILES_PER_BLOCK + 1).map((raw, i) => {
    const tooLong = raw.length > MAX_PATH_CHARS;
    const p = tooLong ? `${raw.slice(0, 64)}…` : raw;
    const name = safeFileName(basename(p));
    const refuse = (why: string): ResolvedFile => ({
      path: p,
      abs: null,
      name,
      mime: mimeOf(name),
      refused: why,
    });
    if (i >= MAX_FILES_PER_BLOCK) {
      return refuse(`more than ${MAX_FILES_PER_BLOCK} files in one block (${paths.length} named)`);
    }
    if (tooLong) return refuse(`path longer than ${MAX_PATH_CHARS} characters`);
    if (p.trim() === '' || p.includes('\0')) return refuse('empty or invalid path');
    const local = p.startsWith(`${WORKSPACE}/`) ? p.slice(WORKSPACE.length + 1) : p;
    try {
      const rel = isAbsolute(local)
        ? relativeInside(root, local)
        : relativeInside(root, resolve(root, local));
      checkInFolderSync(root, rel);
      return { path: p, abs: join(root, rel), name, mime: mimeOf(name), refused: null };
    } catch (err) {
      if (err instanceof FileRefused) return refuse(err.reason);
      throw err;
    }
  });
}
