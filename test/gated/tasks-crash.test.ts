import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { addTask } from '../../store/tasks.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun as spawnRun, gatedUp, until } from '../helpers/process.js';

const gatedRun = (env: Record<string, string>) => gatedUp(spawnRun(env));

async function kill9(child: ChildProcess): Promise<number> {
  child.kill('SIGKILL');
  await exited(child);
  return Date.now();
}

describe('a task every second across two kill -9 restarts', () => {
  it('fires once per due time; due times missed while down fire once, coalesced, at start', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, { GATED_POLL_MS: '500', GATED_IDLE_TIMEOUT_MS: '200' });
    const db = openDatabase(env.GATED_DB);
    addGroup(db, env.GATED_GROUPS_DIR, 'ops');
    const fired = () => db.prepare(`SELECT count(*) FROM task_runs`).pluck().get() as number;

    let gated = await gatedRun(env);
    // Added while gated runs, from another process's connection, as `gated tasks add` would.
    const t0 = Date.now();
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'every', spec: '1s', text: 'tick' },
      t0,
      'UTC',
    );
    // [went down, started again] per outage.
    const downs: Array<[number, number]> = [];
    for (let restart = 0; restart < 2; restart++) {
      const before = fired();
      await until(() => fired() >= before + 2, 15_000, 'two firings on time');
      const down = await kill9(gated);
      // Stay down for over two due times: a restart that is quicker than the grid misses none, and the
      // test is about the ones missed.
      await new Promise((r) => setTimeout(r, 2500));
      gated = await gatedRun(env);
      downs.push([down, Date.now()]);
    }
    await until(() => Date.now() >= t0 + 10_000 && fired() >= 1, 20_000, 'ten seconds of schedule');
    const after = fired();
    await until(() => fired() >= after + 1, 5000, 'a firing after the second restart');
    await until(
      () =>
        db.prepare(`SELECT count(*) FROM messages WHERE verb = 'task' AND state != 'done'`).pluck().get() ===
        0,
      15_000,
      'every task row answered',
    );
    gated.kill('SIGTERM');
    expect(await exited(gated)).toBe(0);

    const rows = db
      .prepare(
        `SELECT r.due_at, r.due_count, r.fired_at, m.id AS msg FROM task_runs r
         JOIN messages m ON m.id = r.message_id WHERE r.task_id = ? ORDER BY r.due_at`,
      )
      .all(id) as Array<{ due_at: string; due_count: number; fired_at: string; msg: number }>;
    // One inbound row per firing, none without a firing.
    expect(db.prepare(`SELECT count(*) FROM messages WHERE sender = ?`).pluck().get(`task:${id}`)).toBe(
      rows.length,
    );
    // Every due time on the grid t0 + k·1 s, each fired at most once (a due time is a row's key).
    const ks = rows.map((r) => (Date.parse(r.due_at) - t0) / 1000);
    for (const k of ks) expect(Number.isInteger(k) && k >= 1, `k=${k}`).toBe(true);
    expect(new Set(ks).size).toBe(ks.length);
    // None missing: the coalesced counts cover every due time from the first to the last.
    const last = ks[ks.length - 1]!;
    expect(last).toBeGreaterThanOrEqual(10);
    expect(rows.reduce((n, r) => n + r.due_count, 0)).toBe(last);
    // Each outage: the first firing after the restart stands for the due times that passed while gated was
    // down (coalesced into one row), and none of them fired before the kill.
    for (const [down, up] of downs) {
      const r = rows.find((x) => Date.parse(x.fired_at) >= down)!;
      expect(r.due_count, 'the first firing after a restart coalesces the missed due times').toBeGreaterThan(
        1,
      );
      expect(Date.parse(r.due_at) - (r.due_count - 1) * 1000).toBeGreaterThan(down - 1000);
      expect(Date.parse(r.due_at)).toBeLessThanOrEqual(up);
    }
    // Away from the outages the task kept its grid: most firings stand for one due time each. (A loaded
    // machine may run a tick late and coalesce two; that changes timing, never the count checked above.)
    expect(rows.filter((x) => x.due_count === 1).length).toBeGreaterThanOrEqual(rows.length / 2);
    db.close();
  }, 90_000);
});
