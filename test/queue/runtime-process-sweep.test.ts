import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';

/** Pids of live processes whose command line is exactly `sleep <n>`. */
function sleepers(n: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8') === `sleep\0${n}\0`) pids.push(Number(entry));
    } catch {
      // ended while we looked
    }
  }
  return pids;
}

describe('process runtime: everything an agent starts dies with its run', () => {
  it('sweeps a child that left the process group with setsid', async () => {
    const n = String(3000 + Math.floor(Math.random() * 999_000));
    const runtime = createProcessRuntime({
      // The agent starts a detached child in a new session, waits until it runs, then exits.
      cmd: `setsid sleep ${n} </dev/null >/dev/null 2>&1 & while ! pgrep -f "^sleep ${n}$" >/dev/null; do :; done; exit 0`,
    });
    const handle = await runtime.start({ runId: 1, group: 'g', topic: '', groupDir: join(tempDir(), 'g') });
    const exit = await handle.exited;
    expect(exit.code).toBe(0);
    // Without the sweep the setsid child outlived the run (it is in no group the runtime kills).
    await until(() => sleepers(n).length === 0, 5000, `sleep ${n} to be gone`);
    expect(sleepers(n)).toEqual([]);
  });
});
