// The spawner: a small long-lived Node process that gated starts once (queue/runtime/spawner.ts) and asks
// to start the process runtime's agents, so that no spawn forks gated itself (a fork copies the page
// tables of gated's whole heap, and the cost grew with it). Plain JavaScript with no imports of ours: it
// runs on bare `node`, from the sources and from an installed package alike, and its heap stays small.
//
// Over the IPC channel (JSON messages; docs/SECURITY.md "Processes"):
//   gated → spawner  { t: 'spawn', id, bin, args, cwd, env, markVar, tailBytes, drainMs, stdoutOnStdin, home,
//                      owner },
//                    { t: 'kill', id }: gated gave up on that start; its agent is killed (now or once started)
//   spawner → gated  { t: 'stdin', id, pid } with the agent's stdin socket as the message's handle,
//                    { t: 'stdout', id } with its stdout socket, or { t: 'failed', id, code, message };
//                    with `stdoutOnStdin` (the command itself writes its output on fd 0, which is a socket
//                    and so both ways), only { t: 'stdio', id, pid } with that one socket;
//                    { t: 'exit', id, code, signal, stderrTail, waitedMs } once it exited and its stderr
//                    closed (or `drainMs` passed).
// The agent's stdin and stdout are the socketpairs libuv made for it: once their handles are sent, the
// spawner holds no copy, so they reach gated as streams and the agent sees gated's end close if gated dies.
// One socket for both is one handle passed instead of two (each handle is a message gated must take and
// acknowledge on its event loop). Its stderr stays here: gated only ever keeps its tail.
//
// At an agent's exit the spawner kills its process group and, when the request names a `markVar` (a run
// without a PID namespace of its own), sweeps /proc for processes still carrying the run's mark
// (`env[markVar]`, inherited by everything the run started, even after `setsid`): that work is done here,
// off gated's event loop.
//
// Before a start that names a `home`, the agent's HOME is made or checked here, as queue/runtime/home.ts
// does it (a directory private to the agent's user; whatever else is at that path removed without being
// followed; the group's folder made when missing, and with an `owner`, handed to that user): that file work is the spawner's, not gated's event loop's.
// A HOME that cannot be made fails the start like a spawn that fails.
//
// When gated goes away (its end of stdin or of the channel closes: gated exited or was killed), the
// spawner kills the process group of every agent it started, then exits: no agent outlives gated through it.
import { spawn } from 'node:child_process';
import {
  chownSync,
  closeSync,
  constants,
  fchownSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';

/** id → the live agent's pid (its process group: agents start detached). */
const live = new Map();
/** Ids gated gave up on before their agent had started: killed as soon as it has. */
const doomed = new Set();

function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: nothing left in the group
  }
}

/** `NAME=value` entries of ended runs that the next pass over /proc looks for. */
const pendingMarks = new Set();
// A pass reads every process's environment: under a burst of run ends, at most one pass this often.
const SWEEP_EVERY_MS = 100;
let lastPass = 0;

/** Kills every process whose environment holds `entry`, in the next pass over /proc. */
function sweep(entry) {
  if (pendingMarks.size === 0) setTimeout(sweepPass, Math.max(0, lastPass + SWEEP_EVERY_MS - Date.now()));
  pendingMarks.add(entry);
}

function sweepPass() {
  lastPass = Date.now();
  const wanted = [...pendingMarks].map((e) => `\0${e}\0`);
  pendingMarks.clear();
  let pids;
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d) && Number(d) !== process.pid);
  } catch {
    return;
  }
  for (const pid of pids) {
    try {
      // A NUL at each end makes the first and the last variable match like the others.
      const environ = `\0${readFileSync(`/proc/${pid}/environ`, 'latin1')}\0`;
      if (wanted.some((w) => environ.includes(w))) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // gone already, or another user's process we cannot read
    }
  }
}

/** The last `max` bytes of a stream. */
function tailOf(stream, max) {
  const chunks = [];
  let bytes = 0;
  stream.on('data', (chunk) => {
    chunks.push(chunk);
    bytes += chunk.length;
    while (chunks.length > 1 && bytes - chunks[0].length >= max) bytes -= chunks.shift().length;
  });
  return () => {
    const all = Buffer.concat(chunks);
    return all.subarray(Math.max(0, all.length - max)).toString('utf8');
  };
}

/** Resolves once `stream` closed, or after `ms`: a child that left the group may hold it open. */
function closedWithin(stream, ms) {
  return new Promise((resolve) => {
    if (stream.closed) return resolve();
    const timer = setTimeout(() => {
      stream.destroy();
      resolve();
    }, ms);
    stream.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function send(message, handle) {
  if (process.connected) process.send(message, handle);
}

// O_PATH: a descriptor for the name, the file itself not opened (Linux; Node does not export it).
const O_PATH = 0o10000000;

/**
 * Gives the folder open at `dirFd` and what is below it to `owner` (queue/runtime/home.ts handOver, the
 * same walk): every entry looked up through its directory's descriptor and opened O_PATH|O_NOFOLLOW, its
 * type checked on that descriptor, the owner changed on that inode; links, files with more than one name,
 * FIFOs, sockets and devices are left alone.
 */
function chownAt(dirFd, owner, depth) {
  fchownSync(dirFd, owner.uid, owner.gid);
  if (depth >= 32) return;
  for (const name of readdirSync(`/proc/self/fd/${dirFd}`)) {
    let fd;
    try {
      fd = openSync(`/proc/self/fd/${dirFd}/${name}`, O_PATH | constants.O_NOFOLLOW);
    } catch {
      continue;
    }
    try {
      const st = fstatSync(fd);
      if (st.isDirectory()) {
        const sub = openSync(`/proc/self/fd/${fd}`, constants.O_RDONLY | constants.O_DIRECTORY);
        try {
          chownAt(sub, owner, depth + 1);
        } finally {
          closeSync(sub);
        }
      } else if (st.isFile() && st.nlink === 1) chownSync(`/proc/self/fd/${fd}`, owner.uid, owner.gid);
    } finally {
      closeSync(fd);
    }
  }
}

/** The folder `dir` handed to `owner` when someone else owns it (its first run as that user). */
function handOver(dir, owner) {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    if (fstatSync(fd).uid !== owner.uid) chownAt(fd, owner, 0);
  } finally {
    closeSync(fd);
  }
}

/**
 * The agent's HOME at `home` in the folder `dir` (queue/runtime/home.ts agentHome, the same steps); with
 * an `owner` (the agent's own uid under a root gated), the folder and the HOME are that user's.
 */
function makeHome(home, dir, owner) {
  const st = lstatSync(home, { throwIfNoEntry: false });
  if (!st?.isDirectory()) {
    if (st) rmSync(home, { force: true });
    try {
      mkdirSync(home, { mode: 0o700 });
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
      mkdirSync(dir, { recursive: true });
      mkdirSync(home, { mode: 0o700 });
    }
  }
  if (owner) {
    handOver(dir, owner);
    handOver(home, owner);
  }
}

function start(req) {
  if (req.home !== undefined) {
    try {
      makeHome(req.home, req.cwd, req.owner);
    } catch (err) {
      return send({ t: 'failed', id: req.id, code: err.code ?? null, message: err.message });
    }
  }
  const shared = req.stdoutOnStdin === true;
  const child = spawn(req.bin, req.args, {
    cwd: req.cwd,
    env: req.env,
    detached: true,
    stdio: ['pipe', shared ? 'ignore' : 'pipe', 'pipe'],
  });
  // Two hazards for the sockets on their way to gated (a handle waits in Node's queue until gated has
  // acknowledged the one before): the stdout socket starts reading as soon as it is made, and whatever it
  // read here would be lost; and at the child's exit the ChildProcess destroys its stdin and resumes its
  // stdout. Nothing was read yet (no turn of the event loop has passed): stop the read now (`pause()`
  // does not stop a socket's handle, hence the handle itself), and take both sockets away from `child`.
  const { stdin, stdout } = child;
  // (A spawn that failed has no handles: its 'error' follows. The stdin socket is not read here.)
  if (stdout?._handle) {
    stdout._handle.readStop();
    stdout._handle.reading = false;
  }
  child.stdin = null;
  child.stdout = null;
  child.stdio[0] = null;
  child.stdio[1] = null;
  const stderrTail = tailOf(child.stderr, req.tailBytes);
  let started = false;
  child.once('error', (err) => {
    // Only a failed start: the spawner neither kills nor messages its children through `child`.
    if (started) return;
    stdin.destroy();
    stdout?.destroy();
    child.stderr.destroy();
    send({ t: 'failed', id: req.id, code: err.code ?? null, message: err.message });
  });
  child.once('spawn', () => {
    started = true;
    live.set(req.id, child.pid);
    if (doomed.delete(req.id)) {
      killGroup(child.pid);
      stdin.destroy();
      stdout?.destroy();
      return;
    }
    if (shared) return send({ t: 'stdio', id: req.id, pid: child.pid }, stdin);
    send({ t: 'stdin', id: req.id, pid: child.pid }, stdin);
    send({ t: 'stdout', id: req.id }, stdout);
  });
  child.once('exit', (code, signal) => {
    const exitAt = Date.now();
    live.delete(req.id);
    // The agent is over: what it left behind would hold its pipes open and outlive the run.
    killGroup(child.pid);
    // No mark to sweep for a run in a PID namespace: the kernel has already ended what it left.
    const mark = req.markVar === undefined ? undefined : req.env[req.markVar];
    if (mark !== undefined) sweep(`${req.markVar}=${mark}`);
    void closedWithin(child.stderr, req.drainMs).then(() =>
      send({ t: 'exit', id: req.id, code, signal, stderrTail: stderrTail(), waitedMs: Date.now() - exitAt }),
    );
  });
}

process.on('message', (req) => {
  if (req && req.t === 'spawn') start(req);
  else if (req && req.t === 'kill') {
    // gated gave up on this start (its run's timeout passed first): its exit report then ends it.
    const pid = live.get(req.id);
    if (pid === undefined) doomed.add(req.id);
    else killGroup(pid);
  }
});

function gatedGone() {
  for (const pid of live.values()) killGroup(pid);
  process.exit(0);
}

// The end of gated, told twice: by the IPC channel, and by stdin, a pipe gated never writes to. Node
// emits no 'disconnect' for a channel that closes while a handle it sent awaits gated's acknowledgement
// (a gated killed right after a spawn); the pipe's end comes whatever the channel was doing.
process.on('disconnect', gatedGone);
process.stdin.on('end', gatedGone);
process.stdin.on('error', gatedGone);
process.stdin.resume();

send({ t: 'ready', pid: process.pid });
