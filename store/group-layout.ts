import {
  closeSync,
  constants,
  lstatSync,
  openSync,
  readlinkSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { groupDirOf } from '../core/group-dir.js';
import type { Logger } from '../core/log.js';
import { isValidFolder } from '../core/types.js';
import type { Db } from './db.js';
import { getState, setState } from './state.js';

/**
 * The move of nested groups' folders out of their parents' (docs/OPERATIONS.md, "Upgrading: nested group
 * folders"). Before, `pub/c` lived at `<groups>/pub/c`, inside the folder `pub`'s agent writes; now it is
 * `<groups>/pub+c` (core/group-dir.ts). At start, before any run, each nested folder still at its old place
 * is renamed to its new one, deepest first (so `a/b/c` leaves `a/b` before `a/b` moves), every file kept
 * with its bytes, mode and owner (a rename moves the folder itself). The old path is the parent agent's and
 * is walked without following a link: a link found there (a parent's agent that swapped its child's folder)
 * is logged and left, never followed, and the child starts with an empty folder. A rename is atomic, so a
 * crash leaves each folder at one place or the other and the next start goes on; the move is done once
 * (router_state `group_layout`), so a folder an agent makes later at an old path is never moved.
 */

/** router_state key: `siblings` once every nested folder was moved. */
export const LAYOUT_KEY = 'group_layout';
const LAYOUT = 'siblings';

/** A nested group's folder could not be moved: gated does not start (its files would look lost). */
export class FolderMoveError extends Error {
  override readonly name = 'FolderMoveError';
}

// O_PATH is Linux's "a descriptor for the name, the file itself not opened"; Node does not export it.
const O_PATH = 0o10000000;
const { O_DIRECTORY, O_NOFOLLOW } = constants;

/** Every folder a group had or has: registered ones and those runs were made for (a route's target). */
function knownFolders(db: Db): string[] {
  const rows = db
    .prepare(`SELECT folder FROM registered_groups UNION SELECT DISTINCT group_folder FROM session_log`)
    .pluck()
    .all() as string[];
  return rows.filter((f) => isValidFolder(f) && f.includes('/'));
}

/** What is at `<groups>/<folder>` (the old place), looked up without following any link on the way. */
type OldPlace =
  { kind: 'missing' } | { kind: 'link'; detail: string } | { kind: 'folder'; dirFd: number; name: string };

function oldPlace(groupsDir: string, folder: string): OldPlace {
  const parts = folder.split('/');
  const name = parts.pop()!;
  let dir = openSync(groupsDir, O_PATH | O_DIRECTORY);
  const at = (n: string) => `/proc/self/fd/${dir}/${n}`;
  for (const part of parts) {
    const st = lstatSync(at(part), { throwIfNoEntry: false });
    if (!st || !st.isDirectory()) {
      closeSync(dir);
      if (st?.isSymbolicLink()) return { kind: 'link', detail: `${part} on the way is a link` };
      return { kind: 'missing' };
    }
    const next = openSync(at(part), O_PATH | O_DIRECTORY | O_NOFOLLOW);
    closeSync(dir);
    dir = next;
  }
  const st = lstatSync(at(name), { throwIfNoEntry: false });
  if (st?.isDirectory()) return { kind: 'folder', dirFd: dir, name };
  const detail = st?.isSymbolicLink() ? `a link to ${readlinkSync(at(name))}` : 'not a folder';
  closeSync(dir);
  return st ? { kind: 'link', detail } : { kind: 'missing' };
}

/** Moves one nested folder from its old place to `dest`; says what it did, or throws FolderMoveError. */
function moveOne(groupsDir: string, folder: string, log: Logger): void {
  const from = join(groupsDir, folder);
  const dest = groupDirOf(groupsDir, folder);
  const old = oldPlace(groupsDir, folder);
  if (old.kind === 'missing') return;
  if (old.kind === 'link') {
    log.warn(
      { folder, from, found: old.detail },
      "nested group folder: the old place is not a folder (its parent's agent may have planted it); not followed, not moved",
    );
    return;
  }
  try {
    if (lstatSync(dest, { throwIfNoEntry: false })) {
      log.warn(
        { folder, from, to: dest },
        'nested group folder: both the old and the new place exist; the old one is left for the operator to merge',
      );
      return;
    }
    renameSync(`/proc/self/fd/${old.dirFd}/${old.name}`, dest);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new FolderMoveError(
      `cannot move the folder of group ${folder} from ${from} to ${dest} (${code}): move it there by hand, then start again`,
    );
  } finally {
    closeSync(old.dirFd);
  }
  // The name was checked before the rename; what the rename moved is checked again where no agent writes.
  if (lstatSync(dest).isDirectory()) {
    log.info({ folder, from, to: dest }, 'moved a nested group folder out of its parent');
    return;
  }
  unlinkSync(dest);
  log.warn({ folder, from }, 'nested group folder: swapped for a link while moving; the link was dropped');
}

/**
 * A reply's files not sent yet name their folder's old place: they are read from the new one instead (and
 * never through the old path, which is the parent agent's now). Done for every folder that is at its new
 * place and gone from its old one, whichever start moved it, deepest first, so a start cut off between a
 * move and this pass finds the rows still to rewrite, and a row already rewritten no longer matches.
 */
function repointFiles(db: Db, groupsDir: string, folders: readonly string[]): void {
  const real = realpathSync(groupsDir);
  const repoint = db.prepare(
    `UPDATE outbound_files SET abs_path = ? || substr(abs_path, ?) WHERE substr(abs_path, 1, ?) = ?`,
  );
  for (const folder of folders) {
    if (!lstatSync(groupDirOf(real, folder), { throwIfNoEntry: false })?.isDirectory()) continue;
    const old = oldPlace(real, folder);
    if (old.kind === 'folder') closeSync(old.dirFd);
    if (old.kind !== 'missing') continue;
    const from = `${join(real, folder)}/`;
    repoint.run(`${groupDirOf(real, folder)}/`, from.length + 1, from.length, from);
  }
}

/**
 * Moves every nested group's folder to its own place beside the others, once (see above). Throws
 * FolderMoveError when one cannot be moved (permissions, another file system): nothing is marked done, and
 * the next start tries again.
 */
export function moveNestedFolders(db: Db, groupsDir: string, log: Logger): void {
  if (getState(db, LAYOUT_KEY) === LAYOUT) return;
  const depth = (f: string) => f.split('/').length;
  const folders = knownFolders(db).sort((a, b) => depth(b) - depth(a) || a.localeCompare(b));
  if (folders.length > 0 && statSync(groupsDir, { throwIfNoEntry: false })?.isDirectory()) {
    for (const folder of folders) moveOne(groupsDir, folder, log);
    repointFiles(db, groupsDir, folders);
  }
  setState(db, LAYOUT_KEY, LAYOUT);
}
