/**
 * What starting an agent costs gated's main thread, by heap size: N runs of an agent that exits at once
 * (`exit 0`, in its PID namespace like every process-runtime run), 5 at a time, through the spawner and
 * spawned by gated itself, rounds interleaved so that neither side always runs on a warmer machine. gated's
 * share is the event loop's active time (a fork blocks the loop for as long as it copies the page tables)
 * and the process's CPU; the spawner's own CPU is counted separately, so the cost is seen moved, not hidden.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createProcessRuntime } from '../queue/runtime/process.js';
import { sharedSpawner } from '../queue/runtime/spawner.js';
import type { Runtime } from '../queue/runtime/types.js';

/** One measured set of runs. */
export interface SpawnRow {
  scenario: 'spawn';
  mode: 'spawner' | 'direct';
  heapMB: number;
  rssMB: number;
  runs: number;
  /** Event-loop active time per run (ms): gated's main thread. */
  loopMsPerRun: number;
  /** gated's process CPU per run (ms): main thread plus libuv's pool. */
  gatedCpuMsPerRun: number;
  /** The spawner's CPU per run (ms); 0 when gated spawned itself. */
  spawnerCpuMsPerRun: number;
  wallMsPerRun: number;
}

/** User + system CPU of a process in ms, from /proc (clock ticks of 10 ms). */
function procCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

async function runAll(runtime: Runtime, n: number, dir: string): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const runId = next++;
      const handle = await runtime.start({ runId, group: 'b', topic: '', groupDir: join(dir, 'b') });
      handle.stdout.resume();
      handle.closeStdin();
      await handle.exited;
    }
  };
  await Promise.all(Array.from({ length: 5 }, worker));
}

async function measure(mode: SpawnRow['mode'], n: number, dir: string): Promise<SpawnRow> {
  const runtime = createProcessRuntime({ cmd: 'exit 0', spawner: mode === 'spawner' });
  const spawner = mode === 'spawner' ? await sharedSpawner() : null;
  // One run first: the namespace probe and the spawner are up before the clock starts.
  await runAll(runtime, 1, dir);
  const spawnerPid = spawner?.pid;
  const cpu0 = process.cpuUsage();
  const sp0 = spawnerPid ? procCpuMs(spawnerPid) : 0;
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  await runAll(runtime, n, dir);
  const wall = performance.now() - t0;
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  const sp = spawnerPid ? procCpuMs(spawnerPid) - sp0 : 0;
  const mem = process.memoryUsage();
  const per = (x: number) => Math.round((x / n) * 1000) / 1000;
  return {
    scenario: 'spawn',
    mode,
    heapMB: Math.round(mem.heapUsed / 2 ** 20),
    rssMB: Math.round(mem.rss / 2 ** 20),
    runs: n,
    loopMsPerRun: per(elu.active),
    gatedCpuMsPerRun: per((cpu.user + cpu.system) / 1000),
    spawnerCpuMsPerRun: per(sp),
    wallMsPerRun: per(wall),
  };
}

/**
 * Runs the measurement at each heap size (MB of live objects gated holds meanwhile), `rounds` times per
 * mode, interleaved; returns one row per mode, heap and round.
 */
export async function benchSpawn(n: number, heapsMB: number[], rounds = 2): Promise<SpawnRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-spawn-'));
  const rows: SpawnRow[] = [];
  let ballast: unknown[] = [];
  try {
    for (const heap of heapsMB) {
      // About 100 bytes per object with its string: a heap of live, scattered objects like gated's own.
      ballast = Array.from({ length: Math.round((heap * 2 ** 20) / 100) }, (_, i) => ({ i, s: `v${i}` }));
      for (let r = 0; r < rounds; r++) {
        for (const mode of r % 2 === 0 ? (['direct', 'spawner'] as const) : (['spawner', 'direct'] as const))
          rows.push(await measure(mode, n, dir));
      }
    }
  } finally {
    ballast.length = 0;
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
