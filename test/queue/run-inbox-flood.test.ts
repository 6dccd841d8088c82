/**
 * A hostile agent that floods its output while another connection holds the write lock. A real agent
 * process (the process runtime, through the spawner) prints 300 blocks of 10 KB as fast as it can and
 * counts, in a file of its folder, the bytes its writes have handed over. While the lock is held, its blocks
 * wait in the run's inbox: gated must stop reading meanwhile, so that the pipe fills and the agent waits,
 * instead of reading all it prints into memory. Once the lock is free, every block is stored, in order.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as realTimeout } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { createQueue } from '../../queue/queue.js';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import type { WorkQueue } from '../../queue/types.js';
import { addGroup } from '../../store/groups.js';
import { freshDb, tempDir, throwingGroupCommit } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { recordingSignals } from '../helpers/signals.js';
import { ready } from './helpers.js';

const BLOCKS = 300;
const BLOCK_CHARS = 10_000;

/**
 * Reads its turn, waits for the file `go`, then prints the blocks; after each, the bytes written so far go
 * to the file `written`. awk's writes block once the pipe to gated is full.
 */
const FLOOD = `read -r line; while [ ! -e go ]; do sleep 0.02; done; exec awk 'BEGIN {
  r = "x"; while (length(r) < ${BLOCK_CHARS}) r = r r; r = substr(r, 1, ${BLOCK_CHARS})
  for (i = 1; i <= ${BLOCKS}; i++) {
    printf "---GATED_OUTPUT_START---\\n{\\"status\\":\\"ok\\",\\"result\\":\\"%s\\"}\\n---GATED_OUTPUT_END---\\n", r
    fflush()
    n += length(r) + 76
    printf "%d\\n", n > "written"; close("written")
  }
}'`;

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(2000);
});

it('stops reading a flooding agent while its blocks wait for the lock, and stores them all after', async () => {
  const { db, path } = freshDb();
  throwingGroupCommit(db);
  const groups = tempDir('gated-flood-');
  const dir = join(groups, 'g1');
  mkdirSync(dir);
  addGroup(db, groups, 'g1');
  const { signals } = recordingSignals();
  const queue = createQueue({
    db,
    runtime: createProcessRuntime({ cmd: FLOOD }),
    config: loadConfig({ GATED_GROUPS_DIR: groups, GATED_IDLE_TIMEOUT_MS: '30000' }),
    log: silentLogger(),
    signals,
  });
  queues.push(queue);
  const m = ready(db, { chat: 'tg:A', content: 'flood' });
  queue.wake();
  await until(() => queue.active().length === 1, 10_000, 'the run to start');
  await realTimeout(50); // the dispatch's group commits

  const other = new Database(path);
  other.exec('BEGIN IMMEDIATE');
  let released = false;
  try {
    writeFileSync(join(dir, 'go'), '');
    await until(() => existsSync(join(dir, 'written')), 10_000, 'the agent to print');
    // The agent prints as fast as it can for 1.5 s while gated cannot store its blocks.
    await realTimeout(1500);
    const written = Number(readFileSync(join(dir, 'written'), 'utf8'));
    // A pipe's and a socket's buffers, and what the stream had read before it paused: well under 2 MB.
    // Read on, the whole 3 MB would have been handed over long before.
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(2 * 1024 * 1024);
    expect(db.prepare('SELECT count(*) FROM messages WHERE is_from_me = 1').pluck().get()).toBe(0);
    other.exec('COMMIT');
    released = true;
  } finally {
    if (!released) other.exec('ROLLBACK');
    other.close();
  }

  await until(
    () => db.prepare('SELECT result FROM session_log').pluck().get() != null,
    30_000,
    'the run to end',
  );
  expect(db.prepare('SELECT result FROM session_log').pluck().get()).toBe('ok');
  expect(db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(m)).toBe('done');
  const lengths = db
    .prepare('SELECT length(content) FROM messages WHERE is_from_me = 1 ORDER BY id')
    .pluck()
    .all() as number[];
  expect(lengths).toHaveLength(BLOCKS);
  expect(lengths.every((n) => n === BLOCK_CHARS)).toBe(true);
  expect(Number(readFileSync(join(dir, 'written'), 'utf8'))).toBe(BLOCKS * (BLOCK_CHARS + 76));
}, 60_000);
