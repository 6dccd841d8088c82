import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../core/config.js';
import { silentLogger } from '../core/log.js';
import { packageFile } from '../core/paths.js';
import { startGated, type Gated } from '../gated/app.js';
import { sharedSpawner } from '../queue/runtime/spawner.js';
import { openDatabase, type Db } from '../store/db.js';
import { BenchChannel } from './channel.js';
import { countSql } from './sql-count.js';
import { monitorLoopDelay } from './loop-delay.js';
import { probeHealth } from './health-probe.mjs';

/** Percentile of sorted numbers. */
export function pct(sorted: readonly number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A process's own CPU seconds and those of its reaped children, from /proc. */
function cpuOf(pid: number | 'self'): { own: number; children: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime, stime, cutime, cstime are fields 14–17 of stat (1-based), 12–15 after the comm split.
  return {
    own: (Number(fields[11]) + Number(fields[12])) / 100,
    children: (Number(fields[13]) + Number(fields[14])) / 100,
  };
}

/**
 * CPU seconds of the agents (reaped by this process, or by the spawner that starts them: queue/runtime/
 * spawner.ts) and of the spawner itself.
 */
async function childCpuSeconds(): Promise<{ agents: number; spawner: number }> {
  const spawner = await sharedSpawner();
  const s = spawner?.pid !== undefined ? cpuOf(spawner.pid) : { own: 0, children: 0 };
  return { agents: cpuOf('self').children + s.children, spawner: s.own };
}

/**
 * Asks `url`/healthz every `everyMs` (the next ask when the last answered) from this process, until `stop()`:
 * the answers' latencies (ms, sorted) and how many were not 200. Its wait includes this process's own turns.
 */
export function healthProber(url: string, everyMs = 50) {
  let stopped = false;
  const asking = probeHealth(url, everyMs, () => stopped);
  return {
    async stop() {
      stopped = true;
      const r = await asking;
      return { latencies: r.latencies.sort((a, b) => a - b), failed: r.failed };
    },
  };
}

/** No questions asked (burst's `inProcessHealth: false`): an empty answer. */
function noHealthProber() {
  return { stop: () => Promise.resolve({ latencies: [] as number[], failed: 0 }) };
}

/**
 * The same questions from a process of its own (bench/health-probe.mjs), as a supervisor asks: its latency
 * is gated's wait alone, where the in-process prober's also waits for its own turns of this event loop.
 */
function externalHealthProber(url: string, everyMs = 50) {
  const child = spawn(process.execPath, [packageFile('bench', 'health-probe.mjs'), url, String(everyMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += String(d)));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let result: Promise<{ latencies: number[]; failed: number }> | undefined;
  return {
    stop() {
      result ??= (async () => {
        child.stdin.end();
        await closed;
        const r = JSON.parse(out || '{"latencies":[],"failed":-1}') as {
          latencies: number[];
          failed: number;
        };
        return { latencies: r.latencies.sort((a, b) => a - b), failed: r.failed };
      })();
      return result;
    },
  };
}

/** Size of the database's WAL file in bytes (0 when there is none). */
function walBytes(dbPath: string): number {
  try {
    return statSync(`${dbPath}-wal`).size;
  } catch {
    return 0;
  }
}

/** CPU seconds of this process's main thread alone (the event loop), from /proc: worker threads excluded. */
function mainThreadCpuSeconds(): number {
  const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of stat (1-based), 12 and 13 after the comm split.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Bytes this process (gated, its checkpoint thread) sent to storage, and its write calls, from /proc. */
function ioCounts(): { bytes: number; calls: number } {
  const io = readFileSync('/proc/self/io', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1] ?? NaN);
  return { bytes: field('write_bytes'), calls: field('syscw') };
}

/** A bench instance: `groups` groups b/gN, each fed by chat bench:gN through one route per group. */
export async function benchInstance(opts: {
  groups: number;
  maxConcurrent: number;
  idleMs: number;
  pollMs?: number;
  /** The docker runtime on this engine and image; default the process runtime with the awk agent. */
  runtime?: { kind: 'docker' | 'swarm'; host: string; image: string };
  /** Per-minute history: off (default), or written every `flushMs`. */
  history?: { flushMs: number };
  /** Serve the dashboard on a free port of 127.0.0.1 (the browser tests look at a filled instance). */
  http?: boolean;
  /** Writes rows before gated starts (bench/scaling.ts: a history already stored). */
  prefill?: (db: Db) => void;
  /**
   * A database file (schema applied, no groups) copied in as the start, before the groups are registered:
   * a history of millions of rows made once (bench/scaling.ts storedHistoryFile) instead of at every run.
   */
  from?: string;
  /** More settings (variables of .env.example) over the bench's own. */
  env?: Record<string, string>;
  /** The bench platform's channel (default a plain BenchChannel; bench/streaming.ts adds drafts). */
  channel?: BenchChannel;
}) {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-'));
  const dbPath = join(dir, 'gated.db');
  const groupsDir = join(dir, 'groups');
  if (opts.from) copyFileSync(opts.from, dbPath);
  const db = openDatabase(dbPath);
  db.transaction(() => {
    const g = db.prepare('INSERT INTO registered_groups (folder) VALUES (?)');
    const r = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
    for (let i = 0; i < opts.groups; i++) {
      g.run(`b/g${i}`);
      r.run(i, `platform=bench room=g${i}`, `b/g${i}`);
      mkdirSync(join(groupsDir, 'b', `g${i}`), { recursive: true });
    }
  })();
  opts.prefill?.(db);
  db.close();
  const config = loadConfig({
    GATED_DB: dbPath,
    GATED_GROUPS_DIR: groupsDir,
    GATED_MAX_CONCURRENT: String(opts.maxConcurrent),
    GATED_IDLE_TIMEOUT_MS: String(opts.idleMs),
    GATED_POLL_MS: String(opts.pollMs ?? 2000),
    GATED_HISTORY_DAYS: opts.history ? '14' : '0',
    GATED_HTTP_PORT: '0',
    // GATED_GROUP_COMMIT=0 in the bench's environment measures without group commit (issue 30's A/B).
    GATED_GROUP_COMMIT: process.env.GATED_GROUP_COMMIT ?? '1',
    // mawk buffers a piped stdin until it fills unless told it is interactive.
    GATED_AGENT_CMD: `exec awk -W interactive -f '${packageFile('bench', 'agent.awk')}'`,
    ...(opts.runtime
      ? {
          GATED_RUNTIME: opts.runtime.kind,
          DOCKER_HOST: opts.runtime.host,
          GATED_AGENT_IMAGE: opts.runtime.image,
        }
      : { GATED_RUNTIME: 'process' }),
    ...opts.env,
  });
  const channel = opts.channel ?? new BenchChannel();
  const gated: Gated = await startGated({
    config,
    log: silentLogger(),
    channels: [channel],
    http: opts.http === true,
    ...(opts.history ? { historyFlushMs: opts.history.flushMs } : {}),
  });
  return {
    dbPath,
    gated,
    channel,
    async close() {
      await gated.close(2000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs bench/writer.ts as a separate process and resolves with its report. */
export function externalWriter(
  dbPath: string,
  groups: number,
  perGroup: number,
  rate = 0,
  firstToken = 0,
): Promise<{ count: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        packageFile('bench', 'writer.ts'),
        dbPath,
        String(groups),
        String(perGroup),
        String(rate),
        String(firstToken),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += String(d)));
    child.once('error', reject);
    // 'close', not 'exit': the process can exit before its stdout pipe has been read to the end.
    child.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`writer exited ${code}`)),
    );
  });
}

/** Per-token facts read back from the database and the bench channel. */
function trace(inst: Awaited<ReturnType<typeof benchInstance>>, expected: number) {
  const db = inst.gated.db;
  const rows = db
    .prepare(
      `SELECT content, timestamp, dispatched_at FROM messages WHERE is_from_me = 0 AND chat_jid LIKE 'bench:%'`,
    )
    .all() as { content: string; timestamp: string; dispatched_at: number | null }[];
  const dispatch: number[] = [];
  const reply: number[] = [];
  let duplicates = 0;
  let delivered = 0;
  for (const r of rows) {
    const ingest = Date.parse(r.timestamp);
    if (r.dispatched_at) dispatch.push(r.dispatched_at - ingest);
    const times = inst.channel.deliveries.get(r.content);
    if (!times) continue;
    delivered += 1;
    duplicates += times.length - 1;
    reply.push(times[0]! - ingest);
  }
  dispatch.sort((a, b) => a - b);
  reply.sort((a, b) => a - b);
  return {
    sent: expected,
    stored: rows.length,
    delivered,
    lost: expected - delivered,
    duplicates,
    dispatch,
    reply,
  };
}

/**
 * Scenario 1: many groups × many messages written at once by an external writer. With `historyFlushMs` the
 * per-minute history is written that often during the burst (the default in production is once a minute).
 */
export async function burst(
  groups: number,
  perGroup: number,
  timeoutMs: number,
  historyFlushMs?: number,
  prefill?: (db: Db) => void,
  more?: {
    /** Settings over the bench's own (bench/memory.ts: the history index on or off). */
    env?: Record<string, string>;
    /** Awaited after the last delivery, before the CPU is read: work behind the pipe counts too. */
    drain?: (gated: Gated) => Promise<void>;
    /** The database to start from (benchInstance `from`). */
    from?: string;
    /**
     * Ask /healthz from this process too (default true). Its client's CPU (undici, ~0.7 ms an ask) is
     * this process's, so it counts in gated's CPU and grows with the wall, not with gated's work: the
     * scaling table leaves it out and keeps the other process's asks (gated's side of /healthz counts).
     */
    inProcessHealth?: boolean;
    /**
     * Called at the measured part's start (after gated is up, before the writer) and at its end (after
     * the drain): bench/per-run.ts counts gated's system calls in between.
     */
    measure?: { start(): Promise<void>; stop(): Promise<void> };
    /**
     * Ask /healthz from another process too (default true). Its asks cost gated about 1 ms each by the
     * second of wall: bench/per-run.ts, which compares shapes of different walls, leaves them out.
     */
    outsideHealth?: boolean;
    /** With BENCH_SQL_TOP: return the statements (sqlStatements) without printing them. */
    quietTop?: boolean;
  },
) {
  const inst = await benchInstance({
    groups,
    maxConcurrent: 5,
    idleMs: 1000,
    http: true,
    ...(historyFlushMs ? { history: { flushMs: historyFlushMs } } : {}),
    ...(prefill ? { prefill } : {}),
    ...(more?.env ? { env: more.env } : {}),
    ...(more?.from ? { from: more.from } : {}),
  });
  // How late a timer runs on gated's loop (the 10 ms period of the probing timer taken off).
  const loop = monitorLoopDelay(10);
  let peakRss = process.memoryUsage().rss;
  let peakWal = 0;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    peakWal = Math.max(peakWal, walBytes(inst.dbPath));
  }, 50);
  const health = more?.inProcessHealth === false ? noHealthProber() : healthProber(inst.gated.url!);
  const outside = more?.outsideHealth === false ? noHealthProber() : externalHealthProber(inst.gated.url!);
  const child0 = await childCpuSeconds();
  const cpu0 = process.cpuUsage();
  const main0 = mainThreadCpuSeconds();
  const io0 = ioCounts();
  const t0 = Date.now();
  // gated's statement calls from the first insert to the last delivery (issue 30); BENCH_SQL_TOP=N also
  // prints the N most called statements, with the time spent in each, on stderr.
  const top = Number(process.env.BENCH_SQL_TOP ?? 0);
  const sql = countSql({ timed: top > 0 });
  await more?.measure?.start();
  try {
    const total = groups * perGroup;
    const writer = externalWriter(inst.dbPath, groups, perGroup);
    const w = await writer;
    await inst.channel.waitFor(total, timeoutMs);
    const wall = (Math.max(inst.channel.lastDelivery, t0) - t0) / 1000;
    await more?.drain?.(inst.gated);
    const cpu = process.cpuUsage(cpu0);
    sql.stop();
    await more?.measure?.stop();
    const child1 = await childCpuSeconds();
    const lines = sql
      .top(top)
      .map((s) => `${String(s.calls).padStart(8)} ${String(s.ms).padStart(6)} ms  ${s.sql}`);
    if (top > 0 && !more?.quietTop) console.error(lines.join('\n'));
    const healthz = await health.stop();
    const healthzOut = await outside.stop();
    const t = trace(inst, total);
    const h = inst.gated.history;
    // A last flush far enough ahead that every minute is closed: the history must count every message.
    if (h) h.flush(Date.now() + 120_000);
    const historyIn = h
      ? (inst.gated.db
          .prepare(`SELECT sum(value) FROM metrics_minute WHERE series = 'in'`)
          .pluck()
          .get() as number)
      : null;
    return {
      scenario: 'burst',
      history: h ? `every ${historyFlushMs} ms` : 'off',
      groups,
      perGroup,
      sent: t.sent,
      delivered: t.delivered,
      lost: t.lost,
      duplicates: t.duplicates,
      wallSeconds: round(wall),
      ingestPerSecond: Math.round(w.count / (w.ms / 1000)),
      dispatchP50ms: pct(t.dispatch, 50),
      dispatchP95ms: pct(t.dispatch, 95),
      dispatchP99ms: pct(t.dispatch, 99),
      replyP50ms: pct(t.reply, 50),
      replyP95ms: pct(t.reply, 95),
      replyP99ms: pct(t.reply, 99),
      gatedCpuSeconds: round((cpu.user + cpu.system) / 1e6),
      // Of which the main thread's: the event loop's work (the rest is worker threads: checkpoints, GC).
      mainThreadCpuSeconds: round(mainThreadCpuSeconds() - main0),
      gatedCpuUsPerMessage: Math.round((cpu.user + cpu.system) / total),
      // SQL statement calls per message, and how many of them are BEGIN/COMMIT/SAVEPOINT/RELEASE.
      sqlPerMessage: round(sql.total() / total),
      sqlCalls: sql.total(),
      // Every statement's calls (BENCH_SQL_TOP set): bench/per-run.ts takes one shape's from another's.
      ...(top > 0 ? { sqlStatements: sql.top(Number.MAX_SAFE_INTEGER) } : {}),
      sqlControlPerMessage: round(sql.control() / total),
      // Write transactions committed (each writes the pages it dirtied to the WAL), with group commit or not.
      groupCommit: inst.gated.config.groupCommit,
      commits: sql.commits(),
      // What reached the disk per message (the WAL's frames, the checkpoints' copies) and the write calls.
      writeKBPerMessage: round((ioCounts().bytes - io0.bytes) / 1024 / total),
      writeCallsPerMessage: round((ioCounts().calls - io0.calls) / total),
      agentCpuSeconds: round(child1.agents - child0.agents),
      // Each agent's start (its fork) is the spawner's work, no longer gated's.
      spawnerCpuSeconds: round(child1.spawner - child0.spawner),
      peakRssMB: Math.round(peakRss / 2 ** 20),
      eventLoopDelayP99ms: round(loop.percentile(99)),
      eventLoopDelayMaxMs: round(loop.max()),
      // /healthz asked every 50 ms during the burst, in this process (its wait is the event loop's).
      healthzAsked: healthz.latencies.length,
      healthzFailed: healthz.failed,
      healthzP99ms: round(pct(healthz.latencies, 99)),
      healthzMaxMs: round(healthz.latencies.at(-1) ?? NaN),
      // The same from another process, as a supervisor asks (bench/health-probe.mjs).
      healthzOutsideAsked: healthzOut.latencies.length,
      healthzOutsideFailed: healthzOut.failed,
      healthzOutsideP99ms: round(pct(healthzOut.latencies, 99)),
      healthzOutsideMaxMs: round(healthzOut.latencies.at(-1) ?? NaN),
      peakWalMB: round(peakWal / 2 ** 20),
      // Runs started: each costs a spawn, so messages per run is what batching buys.
      runs: inst.gated.db.prepare('SELECT count(*) FROM session_log').pluck().get() as number,
      ...(h
        ? {
            historyFlushes: h.totals.flushes,
            historyFlushMsTotal: round(h.totals.ms),
            historyUpserts: h.totals.upserts,
            historyMessagesIn: historyIn,
          }
        : {}),
    };
  } finally {
    sql.stop();
    clearInterval(sampler);
    loop.stop();
    await health.stop();
    await outside.stop();
    await inst.close();
  }
}

/** Scenario 2: light traffic, in-process (adapter path) and external (poll path). */
export async function light(groups: number, perGroup: number, rate: number) {
  const inst = await benchInstance({ groups, maxConcurrent: 5, idleMs: 30_000 });
  try {
    const total = groups * perGroup;
    // Adapter path: the in-process sink, which wakes the loop at once.
    let tok = 0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const g = tok % groups;
        inst.channel.sink!({ chat_jid: `bench:g${g}`, sender: 'bench', content: `tok-${tok++}` });
        if (tok >= total) {
          clearInterval(timer);
          resolve();
        }
      }, 1000 / rate);
    });
    await inst.channel.waitFor(total, 30_000);
    const inProc = trace(inst, total);
    // Poll path: another process writes; gated sees the rows on its next poll.
    await externalWriter(inst.dbPath, groups, perGroup, rate, total);
    await inst.channel.waitFor(2 * total, 30_000);
    const both = trace(inst, 2 * total);
    const servedGroups = new Set(
      inst.gated.db.prepare(`SELECT DISTINCT group_folder FROM session_log`).pluck().all() as string[],
    ).size;
    const extReply = externalLatencies(inst, total);
    return {
      scenario: 'light',
      groups,
      perGroup,
      rate,
      groupsServed: servedGroups,
      delivered: both.delivered,
      lost: both.lost,
      duplicates: both.duplicates,
      inProcessReplyP50ms: pct(inProc.reply, 50),
      inProcessReplyP95ms: pct(inProc.reply, 95),
      externalReplyP50ms: pct(extReply, 50),
      externalReplyP95ms: pct(extReply, 95),
    };
  } finally {
    await inst.close();
  }
}

/** Ingest→reply latencies of the tokens numbered from `first` (the external writer's). */
function externalLatencies(inst: Awaited<ReturnType<typeof benchInstance>>, first: number): number[] {
  const rows = inst.gated.db
    .prepare(`SELECT content, timestamp FROM messages WHERE is_from_me = 0 AND chat_jid LIKE 'bench:%'`)
    .all() as { content: string; timestamp: string }[];
  const out: number[] = [];
  for (const r of rows) {
    if (Number(r.content.slice(4)) < first) continue;
    const t = inst.channel.deliveries.get(r.content)?.[0];
    if (t !== undefined) out.push(t - Date.parse(r.timestamp));
  }
  return out.sort((a, b) => a - b);
}

const round = (x: number) => Math.round(x * 100) / 100;
