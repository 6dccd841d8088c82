import { lchownSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Gives a folder and everything below it to uid:gid, without following symlinks (a link inside a workspace
 * must not hand a file outside it to the agent user).
 */
export function chownTree(dir: string, uid: number, gid: number): void {
  lchownSync(dir, uid, gid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) chownTree(path, uid, gid);
    else lchownSync(path, uid, gid);
  }
}
