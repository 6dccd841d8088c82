// Private folders a run makes in a shared temp folder (its Codex home, home.mjs; its tools' socket folder
// when HOME is too deep, bridge.mjs) say whether the process that made them still runs, so that the next run
// can remove those of a run killed with -9, which could not remove them itself, and never one in use.
//
// A pid cannot say it: under the process runtime every run has a PID namespace and a /proc of its own, so
// the pid a run recorded names nothing (or another process) in the next run's /proc, and a live run's home
// looked abandoned (a concurrent run then deleted the thread it was writing). The owner instead listens on
// a Unix socket in the folder (`.gated-alive`): the kernel closes it when the owner dies, however it dies,
// and a connection to it succeeds from any PID namespace exactly while the owner runs. A folder whose
// socket refuses is removed; one whose socket answers, or that has no `.gated-owner` file yet (being made
// right now), is left alone. Where the socket's path would be too long for a Unix socket, `.gated-owner`
// holds the owner's pid, its start time and its PID namespace, and only a sweeper in the same namespace
// judges it by pid.
import {
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

const OWNER = '.gated-owner';
const ALIVE = '.gated-alive';
/** The longest socket path every platform takes (sun_path is 104–108 bytes with its NUL). */
const MAX_SOCKET_PATH = 100;

/** The listening sockets of this process's folders, closed when the folder is removed. */
const listening = new Map();

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

/** This process's PID namespace (`pid:[4026531836]`), or '' where /proc does not say. */
function pidNamespace() {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}

/** By pid: true while the process that wrote `owner` runs; true also when this process cannot tell. */
function aliveByPid(owner) {
  const [pid, started, ns] = owner.trim().split(' ');
  if (!/^\d+$/.test(pid ?? '') || !ns || ns !== pidNamespace()) return true;
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

/** By the folder's socket: true while its owner listens; false when the socket refuses. */
function aliveBySocket(path) {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    // ECONNREFUSED: the socket file is there and nobody listens (its owner died). Anything else (EACCES,
    // EAGAIN with a full backlog) says nothing of the owner: left alone.
    socket.once('error', (err) => resolve(err.code !== 'ECONNREFUSED'));
  });
}

/** A fresh private folder `parent/prefixXXXXXX` owned by this process (see the top of this file). */
export async function ownedTempDir(parent, prefix) {
  const dir = mkdtempSync(join(parent, prefix));
  const alive = join(dir, ALIVE);
  if (alive.length <= MAX_SOCKET_PATH) {
    const server = createServer((socket) => socket.destroy());
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(alive, resolve);
    });
    // Never what keeps the agent running.
    server.unref();
    listening.set(dir, server);
  }
  // Written last: a folder without it is still being made, and no sweep touches it.
  const self = `${process.pid} ${startTime(process.pid) ?? '-'} ${pidNamespace() || '-'}`;
  writeFileSync(join(dir, OWNER), `${self}\n`);
  return dir;
}

/** Removes a folder `ownedTempDir` made, and stops listening on its socket. */
export function removeOwnedDir(dir) {
  listening.get(dir)?.close();
  listening.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** True while the owner of `dir` (which has its `.gated-owner` file, text `owner`) runs. */
async function ownerAlive(dir, owner) {
  const alive = join(dir, ALIVE);
  const st = lstatSync(alive, { throwIfNoEntry: false });
  if (st?.isSocket()) return aliveBySocket(alive);
  return aliveByPid(owner);
}

/**
 * Removes the folders `parent/prefixXXXXXX` (a six-character suffix, as mkdtemp makes) of this user whose
 * owner is gone. Resolves to how many. Never throws: a folder another run removes at the same time is
 * skipped.
 */
export async function sweepOwnedDirs(parent, prefix) {
  let names = [];
  try {
    names = readdirSync(parent);
  } catch {
    return 0;
  }
  const uid = process.getuid?.();
  const removed = await Promise.all(
    names.map(async (name) => {
      if (!name.startsWith(prefix) || !/^[A-Za-z0-9]{6}$/.test(name.slice(prefix.length))) return 0;
      const dir = join(parent, name);
      if (listening.has(dir)) return 0;
      try {
        const st = lstatSync(dir);
        if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) return 0;
        if (await ownerAlive(dir, readFileSync(join(dir, OWNER), 'utf8'))) return 0;
        rmSync(dir, { recursive: true, force: true });
        return 1;
      } catch {
        // no owner file, or gone already
        return 0;
      }
    }),
  );
  return removed.reduce((a, b) => a + b, 0);
}
