import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { burst } from './pipeline.js';

/**
 * What one agent run costs gated (issue 49, bench/README.md "scaling"): the same total of messages as a
 * burst of many groups of one message each (a run per message) and as one of few groups of many (a run per
 * batch), in turn; the difference of gated's CPU over the difference of runs is the CPU of a run, the same
 * for its SQL statement calls and, with `strace`, its system calls. /healthz is asked by no one (its answers
 * cost gated by the second of wall, and the two shapes differ in wall); gated's idle work (its timers, about
 * 8 ms of CPU a second) is in the difference still.
 */

/** One shape's burst, the figures this bench compares. */
export interface PerRunShape {
  groups: number;
  perGroup: number;
  runs: number;
  wallSeconds: number;
  gatedCpuSeconds: number;
  mainThreadCpuSeconds: number;
  sqlCalls: number;
  lost: number;
  duplicates: number;
  replyP50ms: number;
}

/** One round: both shapes, and what a run costs by their difference. */
export interface PerRunRound {
  many: PerRunShape;
  few: PerRunShape;
  cpuMsPerRun: number;
  mainThreadMsPerRun: number;
  sqlPerRun: number;
  /** With BENCH_SQL_TOP=N: the N statements a run adds most time in, calls and µs per run. */
  sqlTop?: Array<{ sql: string; perRun: number; usPerRun: number }>;
  /** With `strace`: system calls per run of gated's threads, the most first, and the file system's sum. */
  syscalls?: { perRun: Array<{ name: string; perRun: number }>; fileSystemPerRun: number };
}

/** Calls that take a path or act on a file's inode or content (SQLite's pread/pwrite/fcntl among them). */
const FILE_SYSCALLS = new Set([
  'open',
  'openat',
  'stat',
  'lstat',
  'fstat',
  'newfstatat',
  'statx',
  'access',
  'faccessat',
  'faccessat2',
  'readlink',
  'readlinkat',
  'mkdir',
  'mkdirat',
  'rename',
  'renameat',
  'renameat2',
  'unlink',
  'unlinkat',
  'rmdir',
  'getdents64',
  'chmod',
  'fchmod',
  'fchmodat',
  'chown',
  'fchown',
  'fchownat',
  'lchown',
  'utimensat',
  'pread64',
  'pwrite64',
  'fsync',
  'fdatasync',
  'fcntl',
  'flock',
  'lseek',
  'ftruncate',
  'symlink',
  'symlinkat',
  'link',
  'linkat',
  'inotify_add_watch',
  'statfs',
  'fstatfs',
]);

/**
 * `strace -c` attached to every thread of this process (gated's: the event loop, libuv's pool, the
 * checkpoint worker), not following children: the writer, the spawner and the agents are other processes.
 */
function straceCounter() {
  let child: ReturnType<typeof spawn> | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'gated-per-run-'));
  const out = join(dir, 'strace.txt');
  let counts = new Map<string, number>();
  return {
    counts: () => counts,
    async start() {
      const tids = readdirSync(`/proc/${process.pid}/task`);
      child = spawn('strace', ['-c', '-o', out, ...tids.flatMap((t) => ['-p', t])], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      await new Promise<void>((resolve, reject) => {
        child!.once('error', reject);
        child!.stderr!.on('data', (d) => {
          err += String(d);
          if ((err.match(/attached/g) ?? []).length >= tids.length) resolve();
        });
        child!.once('exit', (code) => reject(new Error(`strace exited ${code}: ${err}`)));
      });
    },
    async stop() {
      const c = child!;
      const closed = new Promise<void>((resolve) => c.once('close', () => resolve()));
      c.kill('SIGINT');
      await closed;
      counts = new Map();
      // strace -c's table: % time, seconds, usecs/call, calls, [errors,] syscall.
      for (const line of readFileSync(out, 'utf8').split('\n')) {
        const f = line.trim().split(/\s+/);
        const name = f.at(-1)!;
        if (f.length < 5 || !/^\d/.test(f[0]!) || name === 'total') continue;
        counts.set(name, Number(f[3]));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function shape(groups: number, perGroup: number, strace: boolean) {
  const counter = strace ? straceCounter() : undefined;
  const r = await burst(groups, perGroup, 600_000, undefined, undefined, {
    inProcessHealth: false,
    outsideHealth: false,
    quietTop: true,
    ...(counter ? { measure: counter } : {}),
  });
  const figures: PerRunShape = {
    groups,
    perGroup,
    runs: r.runs,
    wallSeconds: r.wallSeconds,
    gatedCpuSeconds: r.gatedCpuSeconds,
    mainThreadCpuSeconds: r.mainThreadCpuSeconds,
    sqlCalls: r.sqlCalls,
    lost: r.lost,
    duplicates: r.duplicates,
    replyP50ms: r.replyP50ms,
  };
  return { figures, statements: r.sqlStatements, syscalls: counter?.counts() };
}

/**
 * `rounds` rounds of both shapes (`total` messages each: `total` groups × 1 and `fewGroups` ×
 * total / fewGroups), their order swapped every round. `strace`: count system calls too (their CPU is then
 * strace's, not to be compared).
 */
export async function perRun(opts: {
  total: number;
  fewGroups: number;
  rounds: number;
  strace?: boolean;
}): Promise<PerRunRound[]> {
  const top = Number(process.env.BENCH_SQL_TOP ?? 0);
  const rounds: PerRunRound[] = [];
  for (let i = 0; i < opts.rounds; i++) {
    const order = i % 2 === 0 ? ['many', 'few'] : ['few', 'many'];
    const got: Record<string, Awaited<ReturnType<typeof shape>>> = {};
    for (const which of order) {
      got[which] =
        which === 'many'
          ? await shape(opts.total, 1, opts.strace === true)
          : await shape(opts.fewGroups, opts.total / opts.fewGroups, opts.strace === true);
    }
    const many = got.many!;
    const few = got.few!;
    const dRuns = many.figures.runs - few.figures.runs;
    const per = (a: number, b: number) => Math.round(((a - b) / dRuns) * 1000) / 1000;
    const round: PerRunRound = {
      many: many.figures,
      few: few.figures,
      cpuMsPerRun: per(many.figures.gatedCpuSeconds * 1000, few.figures.gatedCpuSeconds * 1000),
      mainThreadMsPerRun: per(
        many.figures.mainThreadCpuSeconds * 1000,
        few.figures.mainThreadCpuSeconds * 1000,
      ),
      sqlPerRun: per(many.figures.sqlCalls, few.figures.sqlCalls),
    };
    if (top > 0 && many.statements && few.statements) {
      const fewOf = new Map(few.statements.map((s) => [s.sql, s]));
      round.sqlTop = many.statements
        .map((s) => ({
          sql: s.sql,
          perRun: per(s.calls, fewOf.get(s.sql)?.calls ?? 0),
          usPerRun: Math.round(per((s.ms ?? 0) * 1000, (fewOf.get(s.sql)?.ms ?? 0) * 1000)),
        }))
        .sort((a, b) => b.usPerRun - a.usPerRun)
        .slice(0, top);
    }
    if (many.syscalls && few.syscalls) {
      const names = new Set([...many.syscalls.keys(), ...few.syscalls.keys()]);
      const perRunCalls = [...names]
        .map((name) => ({
          name,
          perRun: per(many.syscalls!.get(name) ?? 0, few.syscalls!.get(name) ?? 0),
        }))
        .sort((a, b) => b.perRun - a.perRun);
      round.syscalls = {
        perRun: perRunCalls.filter((s) => Math.abs(s.perRun) >= 0.05),
        fileSystemPerRun:
          Math.round(
            perRunCalls.filter((s) => FILE_SYSCALLS.has(s.name)).reduce((a, s) => a + s.perRun, 0) * 100,
          ) / 100,
      };
    }
    rounds.push(round);
  }
  return rounds;
}
