import { realpathSync, statSync } from 'node:fs';
import { basename, isAbsolute, relative, resolve } from 'node:path';
import { mimeOf, safeFileName } from '../core/files.js';
import type { ResolvedFile } from '../store/outbound-files.js';
import { WORKSPACE } from './runtime/mounts.js';

/** Most files one block may send; more are refused (a runaway agent must not flood a chat). */
export const MAX_FILES_PER_BLOCK = 10;

/**
 * Checks the files a block names against the group's folder. A path is taken relative to the folder (a
 * container's `/workspace/…` is the folder too; another absolute path is taken as it is), its symlinks are resolved, and it is sent only when the real file lies inside the
 * folder's real path: `../x`, `/etc/passwd` and a link pointing out are refused with a reason, as is
 * anything missing or not a regular file.
 */
export function resolveFiles(groupDir: string, paths: readonly string[]): ResolvedFile[] {
  let root: string;
  try {
    root = realpathSync(groupDir);
  } catch {
    root = resolve(groupDir);
  }
  return paths.map((p, i) => {
    const name = safeFileName(basename(p));
    const refuse = (why: string): ResolvedFile => ({
      path: p,
      abs: null,
      name,
      mime: mimeOf(name),
      refused: why,
    });
    if (i >= MAX_FILES_PER_BLOCK) return refuse(`more than ${MAX_FILES_PER_BLOCK} files in one block`);
    if (p.trim() === '' || p.includes('\0')) return refuse('empty or invalid path');
    const local = p.startsWith(`${WORKSPACE}/`) ? p.slice(WORKSPACE.length + 1) : p;
    let real: string;
    try {
      real = realpathSync(isAbsolute(local) ? local : resolve(root, local));
    } catch {
      return refuse('no such file');
    }
    const rel = relative(root, real);
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return refuse('outside the group folder');
    if (!statSync(real).isFile()) return refuse('not a regular file');
    return { path: p, abs: real, name, mime: mimeOf(name), refused: null };
  });
}
