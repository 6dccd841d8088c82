// The WAL checkpointer of gated's database, run on a worker thread by store/checkpoint.ts with a connection
// of its own, so that copying the WAL into the database file and syncing it never happens on the event loop
// (docs/OPERATIONS.md, "The WAL and its checkpoints"). Plain JavaScript: a worker thread is started from a
// file Node runs as it is, from the sources (tests, tsx) and from dist/ alike.
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** @type {{ path: string, everyMs: number, truncateBytes: number, lockWaitMs: number }} */
const { path, everyMs, truncateBytes, lockWaitMs } = workerData;
const wal = `${path}-wal`;
// Only this connection's own waits: PASSIVE never waits for a lock; TRUNCATE waits this long for writers
// and readers to finish, then holds the write lock while it copies, so the wait is kept short (gated's
// own writers wait behind it).
const db = new Database(path, { fileMustExist: true, timeout: lockWaitMs });
db.pragma(`busy_timeout = ${lockWaitMs}`);
// Changes of the WAL are seen by its modification time and size; a pass runs at least once a second
// anyway, for a change that fell within the same clock tick as the last look.
let lastLook = '';
let lastPass = 0;
let timer;

function checkpoint(mode) {
  const started = performance.now();
  const [r] = db.pragma(`wal_checkpoint(${mode})`);
  return { mode, busy: r.busy, frames: r.log, copied: r.checkpointed, ms: performance.now() - started };
}

function pass() {
  let st;
  try {
    st = statSync(wal);
  } catch {
    return; // no WAL file: nothing was written since the last connection closed
  }
  const look = `${st.mtimeMs}/${st.size}`;
  const now = Date.now();
  if (st.size === 0 || (look === lastLook && now - lastPass < 1000)) return;
  lastPass = now;
  const passive = checkpoint('PASSIVE');
  // A WAL that grew past the bound while writers never left a moment for it to start over is copied
  // to the end and truncated; if the locks are not free within lockWaitMs, the next pass tries again.
  const bound = st.size > truncateBytes ? checkpoint('TRUNCATE') : undefined;
  const done = bound ?? passive;
  if (done.busy === 0 && done.copied === done.frames) lastLook = look;
  parentPort.postMessage({ type: 'pass', passive, bound, walBytes: st.size });
}

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
  db.close();
  parentPort.close();
});
loop();
