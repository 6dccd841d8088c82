// Private folders a run makes in a shared temp folder (its Codex home, home.mjs; its tools' socket folder
// when HOME is too deep, bridge.mjs) name the process that owns them, so that the next run can remove those
// of a run killed with -9, which could not remove them itself. A folder is removed only when its owner is
// known and gone: its file `.gated-owner` holds the owner's pid and the time that process started (the
// 22nd field of /proc/PID/stat), so a pid used again by another process does not keep it; a folder without
// the file (being made right now, or made before owners were written) is left alone.
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const OWNER = '.gated-owner';

/** The start time of process `pid` as /proc gives it, or undefined when it does not run (or no /proc). */
function startTime(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** True while the process that wrote `owner` (a `.gated-owner` file's text) runs. */
function alive(owner) {
  const [pid, started] = owner.trim().split(' ');
  if (!/^\d+$/.test(pid ?? '')) return true;
  const now = startTime(pid);
  if (now !== undefined) return started === undefined || now === started;
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user. Without /proc, only ESRCH says it is gone.
    return err.code !== 'ESRCH';
  }
}

/** A fresh private folder `parent/prefixXXXXXX` owned by this process. */
export function ownedTempDir(parent, prefix) {
  const dir = mkdtempSync(join(parent, prefix));
  writeFileSync(join(dir, OWNER), `${process.pid} ${startTime(process.pid) ?? ''}`.trim() + '\n');
  return dir;
}

/**
 * Removes the folders `parent/prefixXXXXXX` (a six-character suffix, as mkdtemp makes) of this user whose
 * owner is gone. Returns how many. Never throws: a folder another run removes at the same time is skipped.
 */
export function sweepOwnedDirs(parent, prefix) {
  let removed = 0;
  let names = [];
  try {
    names = readdirSync(parent);
  } catch {
    return 0;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    if (!name.startsWith(prefix) || !/^[A-Za-z0-9]{6}$/.test(name.slice(prefix.length))) continue;
    const dir = join(parent, name);
    try {
      const st = lstatSync(dir);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      if (alive(readFileSync(join(dir, OWNER), 'utf8'))) continue;
      rmSync(dir, { recursive: true, force: true });
      removed += 1;
    } catch {
      // no owner file, or gone already
    }
  }
  return removed;
}
