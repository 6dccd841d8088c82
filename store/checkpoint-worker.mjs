// The WAL checkpointer of gated's database, run on a worker thread by store/checkpoint.ts with a connection
// of its own, so that copying the WAL into the database file and syncing it never happens on the event loop
// (docs/OPERATIONS.md, "The WAL and its checkpoints"). Plain JavaScript: a worker thread is started from a
// file Node runs as it is, from the sources (tests, tsx) and from dist/ alike.
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { endianness } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** @type {{ path: string, everyMs: number, frames: number, idleMs: number, truncateBytes: number, lockWaitMs: number }} */
const { path, everyMs, frames, idleMs, truncateBytes, lockWaitMs } = workerData;
const wal = `${path}-wal`;
// Only this connection's own waits: PASSIVE never waits for a lock; TRUNCATE waits this long for writers
// and readers to finish, then holds the write lock while it copies, so the wait is kept short (gated's
// own writers wait behind it).
const db = new Database(path, { fileMustExist: true, timeout: lockWaitMs });
db.pragma(`busy_timeout = ${lockWaitMs}`);

// The WAL index (the -shm file SQLite maps into every connection) says how far the WAL goes and how much
// of it is in the database file already: mxFrame at byte 16 of its header, nBackfill at byte 96, both in
// this machine's byte order. Read, never written; a file that is not there yet is looked for again.
const shm = Buffer.alloc(100);
const u32 = endianness() === 'LE' ? (at) => shm.readUInt32LE(at) : (at) => shm.readUInt32BE(at);
let shmFd;
function pending() {
  try {
    shmFd ??= openSync(`${path}-shm`, 'r');
    if (readSync(shmFd, shm, 0, 100, 0) < 100) return 0;
  } catch {
    if (shmFd !== undefined) closeSync(shmFd);
    shmFd = undefined;
    return 0;
  }
  const max = u32(16);
  const backfilled = u32(96);
  return max > backfilled ? max - backfilled : 0;
}

function checkpoint(mode) {
  const started = performance.now();
  const [r] = db.pragma(`wal_checkpoint(${mode})`);
  return { mode, busy: r.busy, frames: r.log, copied: r.checkpointed, ms: performance.now() - started };
}

let changedAt = Date.now();
let lastPending = 0;

/**
 * As SQLite would on the committing connection: a PASSIVE checkpoint once `frames` frames wait in the WAL,
 * and also once the WAL has stopped growing for `idleMs` with any waiting; a TRUNCATE when the file is
 * over `truncateBytes` (writers never left a moment for the WAL to start over from its beginning).
 */
function pass() {
  const now = Date.now();
  const n = pending();
  if (n !== lastPending) changedAt = now;
  lastPending = n;
  let size = 0;
  try {
    size = statSync(wal).size;
  } catch {
    return; // no WAL file: nothing was written since the last connection closed
  }
  const over = size > truncateBytes;
  if (!over && (n === 0 || (n < frames && now - changedAt < idleMs))) return;
  const passive = checkpoint('PASSIVE');
  const bound = over ? checkpoint('TRUNCATE') : undefined;
  // What is left (readers kept it) waits for the next `frames`, or for the next idle time.
  lastPending = pending();
  changedAt = now;
  parentPort.postMessage({ type: 'pass', passive, bound, walBytes: size });
}

let timer;
function loop() {
  try {
    pass();
  } catch (err) {
    parentPort.postMessage({ type: 'error', message: String(err && err.message ? err.message : err) });
  }
  timer = setTimeout(loop, everyMs);
}

parentPort.on('message', (m) => {
  if (m !== 'close') return;
  clearTimeout(timer);
  if (shmFd !== undefined) closeSync(shmFd);
  db.close();
  parentPort.close();
});
loop();
