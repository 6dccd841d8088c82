import { chownSync, closeSync, constants, fchownSync, fstatSync, openSync, readdirSync } from 'node:fs';

/**
 * Gives a group's folder and what is below it to uid:gid (root gated handing a folder it made to the
 * unprivileged agent user). Nothing is chowned through a path: the walk starts at the folder's descriptor,
 * every entry is looked up through its directory's descriptor (`/proc/self/fd/<fd>/<name>`, Linux's
 * `openat`) and opened with O_PATH | O_NOFOLLOW, its type checked on that descriptor, and the owner changed
 * on that same inode (`fchown`, or `chown` of the descriptor's own magic link). A link is never followed nor
 * chowned, a file with more than one name (a hard link to a file elsewhere) is left alone, and so are FIFOs,
 * sockets and devices: what changes owner is exactly the folders and files that were checked, inside the
 * folder. Deeper than MAX_DEPTH levels nothing is changed (no real workspace is that deep).
 */

// O_PATH is Linux's "a descriptor for the name, the file itself not opened"; Node does not export it.
const O_PATH = 0o10000000;
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

/** Levels below the folder whose entries still change owner. */
export const MAX_DEPTH = 32;

/** Changes the owner of the folder open at `dirFd` and of its entries, as described above. */
export function chownTreeAt(dirFd: number, uid: number, gid: number, depth = 0): void {
  fchownSync(dirFd, uid, gid);
  if (depth >= MAX_DEPTH) return;
  for (const name of readdirSync(`/proc/self/fd/${dirFd}`)) {
    let entry: number;
    try {
      entry = openSync(`/proc/self/fd/${dirFd}/${name}`, O_PATH | O_NOFOLLOW);
    } catch {
      continue; // gone meanwhile
    }
    try {
      const st = fstatSync(entry);
      if (st.isDirectory()) {
        const sub = openSync(`/proc/self/fd/${entry}`, O_RDONLY | O_DIRECTORY);
        try {
          chownTreeAt(sub, uid, gid, depth + 1);
        } finally {
          closeSync(sub);
        }
      } else if (st.isFile() && st.nlink === 1) {
        // The magic link of an O_PATH descriptor is the inode just checked, whatever the name holds now.
        chownSync(`/proc/self/fd/${entry}`, uid, gid);
      }
    } finally {
      closeSync(entry);
    }
  }
}
