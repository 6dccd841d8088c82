/**
 * `npm run bench [-- --quick] [-- --only=burst,light,...]`: every scenario of bench/README.md against a
 * real gated (real SQLite file, real loop, real queue, process runtime; the docker scenario on a real
 * engine). Prints a table per scenario with its target, and writes everything as JSON to bench/results/.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { packageFile } from '../core/paths.js';
import { benchAccess } from './access.js';
import { benchAsks } from './asks.js';
import { burst, light } from './pipeline.js';
import { benchPollTick } from './poll.js';
import { benchGlob } from './glob.js';
import { benchRouting } from './routing.js';
import { benchTelegramWindow } from './telegram-window.js';

const quick = process.argv.includes('--quick');
const onlyArg = process.argv.find((a) => a.startsWith('--only='));
const only = onlyArg ? new Set(onlyArg.slice('--only='.length).split(',')) : undefined;
const want = (name: string) => !only || only.has(name);
const results: Record<string, unknown> = {};

function table(title: string, rows: Array<Record<string, unknown>>, target: string): void {
  console.log(`\n## ${title}   (target: ${target})`);
  for (const r of rows) {
    console.log(
      Object.entries(r)
        .filter(([k]) => k !== 'scenario')
        .map(([k, v]) => `${k}=${typeof v === 'number' ? v.toLocaleString('en') : String(v)}`)
        .join('  '),
    );
  }
}

function verdict(ok: boolean): string {
  return ok ? 'MET' : 'NOT MET';
}

const machine = {
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model,
  memGB: Math.round(totalmem() / 2 ** 30),
  node: process.version,
};
console.log(
  `gated bench ${quick ? '(quick)' : '(full)'} on ${machine.cpus} × ${machine.cpuModel}, ${machine.memGB} GB, node ${machine.node}`,
);

if (want('burst')) {
  const [groups, per] = quick ? [100, 20] : [1000, 100];
  const timeout = quick ? 60_000 : 180_000;
  // Without history, then with it written every second (60 × the production rate), twice each in turn so
  // that neither side always runs on a warmer machine; the ratio of the means is the history's write cost.
  const off: Awaited<ReturnType<typeof burst>>[] = [];
  const on: Awaited<ReturnType<typeof burst>>[] = [];
  for (let i = 0; i < 2; i++) {
    off.push(await burst(groups, per, timeout));
    on.push(await burst(groups, per, timeout, 1000));
  }
  const all = [...off, ...on];
  const mean = (rs: typeof all, k: 'wallSeconds' | 'gatedCpuSeconds') =>
    rs.reduce((a, x) => a + x[k], 0) / rs.length;
  const cost = {
    wallOff: round2(mean(off, 'wallSeconds')),
    wallOn: round2(mean(on, 'wallSeconds')),
    wallRatio: round2(mean(on, 'wallSeconds') / mean(off, 'wallSeconds')),
    cpuOff: round2(mean(off, 'gatedCpuSeconds')),
    cpuOn: round2(mean(on, 'gatedCpuSeconds')),
    cpuRatio: round2(mean(on, 'gatedCpuSeconds') / mean(off, 'gatedCpuSeconds')),
  };
  results.burst = { runs: all, historyCost: cost };
  const ok = all.every(
    (x) => x.lost === 0 && x.duplicates === 0 && x.delivered === x.sent && x.wallSeconds < 30,
  );
  const counted = on.every((x) => x.historyMessagesIn === x.sent);
  table(
    `1. burst: ${groups} groups × ${per} messages, cap 5, idle 1 s — ${verdict(ok)}`,
    all,
    '100 % delivered, 0 lost, 0 duplicates, < 30 s',
  );
  table(
    `1b. burst: cost of writing the history every second — ${verdict(counted && cost.cpuRatio <= 1.1)}`,
    [cost],
    'history counts every message; gated CPU with/without ≤ 1.10',
  );
}

// Concurrent streaming turns (issue 49): about 25 s a size, so only when named.
if (only?.has('streaming')) {
  const { streaming } = await import('./streaming.js');
  const sizes = quick ? [10, 50] : [10, 50, 200];
  const rows = [];
  for (const n of sizes) rows.push(await streaming(n, 20_000));
  results.streaming = rows;
  const last = rows.at(-1)!;
  const ok =
    rows.every((r) => r.delivered === r.chats && r.answeredTwice === 0) &&
    last.eventLoopDelayP99ms <= 20 &&
    last.canaryP50ms <= 2 * last.canaryIdleP50ms &&
    last.firstDraftP50ms <= 500;
  table(
    `1d. streaming: N chats each streaming a 20 s answer as drafts, a canary and /healthz asked — ${verdict(ok)}`,
    rows,
    'at the largest N: loop p99 ≤ 20 ms, canary ≤ 2× idle, first draft p50 ≤ 500 ms, every answer once',
  );
}

// The same with every chat's agent already live (a conversation within the agents' idle timeout): only when
// named, and beside the cold figures above, never instead of them.
if (only?.has('streaming-warm')) {
  const { streaming } = await import('./streaming.js');
  const sizes = quick ? [10, 50] : [10, 50, 200];
  const rows = [];
  for (const n of sizes) rows.push(await streaming(n, 20_000, true));
  results.streamingWarm = rows;
  const last = rows.at(-1)!;
  const ok =
    rows.every((r) => r.delivered === r.chats && r.answeredTwice === 0) &&
    last.eventLoopDelayP99ms <= 20 &&
    last.canaryP50ms <= 2 * last.canaryIdleP50ms &&
    last.firstDraftP50ms <= 500;
  table(
    `1d'. streaming, agents warm: as 1d, each chat's agent started by a first message before the streams — ${verdict(ok)}`,
    rows,
    "as 1d at the largest N; the cold 1d is the target, this shows what the agents' starts cost",
  );
}

// The same over Telegram, with its flood limits (local Bot API): only when named.
if (only?.has('streaming-telegram')) {
  const { streamingTelegram } = await import('./streaming-telegram.js');
  const sizes = quick ? [10, 50] : [10, 50, 200];
  const rows = [];
  for (const n of sizes) rows.push(await streamingTelegram(n, 20_000));
  results.streamingTelegram = rows;
  const ok = rows.every((r) => r.delivered === r.chats && r.answeredTwice === 0);
  table(
    `1e. streaming over Telegram (flood limits on): N chats each streaming a 20 s answer — ${verdict(ok)}`,
    rows,
    'every answer once, none lost, no stale draft; the loop and first draft as 1d (the first drafts wait on Telegram’s 30 a second)',
  );
}

// What one run costs gated (issue 49): two shapes of the same total, in turn; only when named.
if (only?.has('per-run')) {
  const { perRun } = await import('./per-run.js');
  const strace = process.argv.includes('--strace');
  const rounds = await perRun({
    total: quick ? 1000 : 2000,
    fewGroups: quick ? 50 : 100,
    rounds: Number(process.env.BENCH_ROUNDS ?? (quick || strace ? 1 : 3)),
    strace,
  });
  results.perRun = rounds;
  for (const r of rounds) {
    table(
      `1f. per run: ${r.many.groups} × ${r.many.perGroup} against ${r.few.groups} × ${r.few.perGroup}, the difference per run`,
      [
        { ...r.many },
        { ...r.few },
        {
          cpuMsPerRun: r.cpuMsPerRun,
          mainThreadMsPerRun: r.mainThreadMsPerRun,
          sqlPerRun: r.sqlPerRun,
          ...(r.syscalls ? { fileSystemCallsPerRun: r.syscalls.fileSystemPerRun } : {}),
        },
      ],
      'gated CPU per run ≤ 1 ms',
    );
    if (r.sqlTop)
      for (const s of r.sqlTop)
        console.log(`${s.perRun.toFixed(2).padStart(7)} ${String(s.usPerRun).padStart(5)} µs  ${s.sql}`);
    if (r.syscalls) console.log(r.syscalls.perRun.map((s) => `${s.name}=${s.perRun}`).join('  '));
  }
  if (rounds.length > 1) {
    const cpu = rounds.map((r) => r.cpuMsPerRun).sort((a, b) => a - b);
    console.log(
      `per run, ${rounds.length} rounds: CPU ${cpu.join(' / ')} ms (median ${cpu[cpu.length >> 1]})`,
    );
  }
}

// The scaling table takes several bursts (minutes at full size): it runs only when named.
if (only?.has('scaling')) {
  const { scaling } = await import('./scaling.js');
  const rows = await scaling(quick);
  results.scaling = rows;
  const ok = rows.every((r) => r.lost === 0 && r.duplicates === 0);
  table(
    `1c. scaling: the burst by groups (same total, ${rows[0]!.sent.toLocaleString('en')} messages) and with a history stored — ${verdict(ok)}`,
    rows.map((r) => ({ ...r })),
    '0 lost, 0 duplicates; report how wall and CPU per message grow',
  );
}

if (want('light')) {
  const [groups, per, rate] = quick ? [10, 2, 5] : [10, 10, 2];
  const r = await light(groups, per, rate);
  results.light = r;
  const ok =
    r.groupsServed === groups && r.inProcessReplyP50ms <= 50 && r.externalReplyP50ms <= 2000 / 2 + 10;
  table(
    `2. light: ${groups} groups × ${per} messages at ${rate} msg/s — ${verdict(ok)}`,
    [r],
    'all groups served; p50 ≤ 50 ms in-process, ≤ poll/2 + 10 ms external',
  );
}

if (want('poll')) {
  const sizes = quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000];
  const rows = sizes.map((n) => benchPollTick(n));
  results.poll = rows;
  const worst = Math.max(...rows.map((r) => r.emptyTickUs));
  table(
    `3. poll tick cost by stored messages — ${verdict(worst <= 2000)}`,
    rows,
    '≤ 2 ms (2000 µs) at 1M stored rows, flat',
  );
}

if (want('routing')) {
  const rows = benchRouting([10, 100, 1000, 10_000], quick ? 300 : 1500);
  results.routing = rows;
  const at100 = rows.find((r) => r.routes === 100)!.perSecond;
  table(
    `4. routing: resolutions/s by table size — ${verdict(at100 >= 1_000_000)}`,
    rows,
    '≥ 1,000,000/s at 100 routes',
  );
}

if (want('glob')) {
  const rows = benchGlob(quick ? 500 : 2000);
  results.glob = rows;
  const worst = Math.max(...rows.filter((r) => r.matcher === 'linear').map((r) => r.ms));
  table(
    `4b. glob: worst accepted pattern (≤ 16 wildcards, ≤ 256 chars) on a 256-char value — ${verdict(worst < 1)}`,
    rows.map((r) => ({ ...r, ms: Number(r.ms.toFixed(4)) })),
    'linear matcher < 1 ms; the regexp rows show why globs are not compiled to a RegExp',
  );
}

if (want('access')) {
  const rows = benchAccess(quick ? 100 : 500);
  results.access = rows;
  const open = rows[0]!.perDecisionUs;
  table(
    `4c. access: one access decision per routed message — ${verdict(open <= 5)}`,
    rows,
    '≤ 5 µs for an open group (the default); the other rows are what members, codes and limits add',
  );
}

if (want('asks')) {
  const r = await benchAsks(quick ? 200 : 2000);
  results.asks = r;
  table(
    `4d. tool approvals: an agent's ask → its permission line, allow rule, no human — ${verdict(r.p50Ms < 5)}`,
    [{ ...r }],
    'p50 < 5 ms (50 rules in the group; measured in the agent from writing the ask to reading the line)',
  );
}

if (want('docker')) {
  const dockerd = ['/usr/bin/dockerd', '/usr/sbin/dockerd', '/usr/local/bin/dockerd'].find((p) =>
    existsSync(p),
  );
  if (!dockerd) {
    results.docker = { skipped: 'dockerd is not installed: run scripts/setup.sh (Debian docker.io)' };
    console.log(
      '\n## 5. docker: skipped — dockerd is not installed: run scripts/setup.sh (Debian docker.io)',
    );
  } else {
    const { dockerOverhead } = await import('./docker.js');
    const r = await dockerOverhead(quick ? 3 : 20);
    results.docker = r;
    table('5. docker: gated run overhead over bare dockerode, same image', [r], 'report the ratio');
  }
}

if (want('swarm')) {
  const { swarmScale } = await import('./swarm.js');
  const r = await swarmScale(quick ? 3 : 15, quick ? 5 : 40);
  results.swarm = r;
  const { phases, inside, ...figures } = r;
  table(
    `9. swarm: one-shot services vs plain containers on one engine, and runs held at once on one node — a new group's run ${verdict(r.replyRatio <= 1.3 && r.cycleRatio <= 1.3)}, a group's next run (on a spare) ${verdict(r.nextReplyRatio <= 1.3 && r.nextCycleRatio <= 1.3)}`,
    [figures],
    'reply and cycle ≤ 1.3 × the docker runtime; report the memory per run',
  );
  table('9b. swarm: where a run goes, ms from ingest (medians, engine events)', phases, 'report it');
  table(
    "9c. swarm: inside the swarm, a new group's run, ms from its service's create (engine debug log)",
    inside,
    'report it',
  );
}

if (want('claude')) {
  const { claudeBench } = await import('./claude.js');
  const docker = ['/usr/bin/dockerd', '/usr/sbin/dockerd', '/usr/local/bin/dockerd'].some((p) =>
    existsSync(p),
  );
  const rows = await claudeBench(quick ? 2 : 5, docker);
  results.claude = rows;
  table(
    'claude: the Claude agent through gated vs alone (cold runs, a 1 s streamed answer; medians)',
    rows.map((r) => ({ ...r })),
    'report the ratios and the agent memory',
  );
}

if (want('spawn')) {
  const { benchSpawn } = await import('./spawn.js');
  const rows = await benchSpawn(quick ? 100 : 400, [0, 200]);
  results.spawn = rows;
  const loop = (mode: string, heap: number) => {
    const rs = rows.filter((r) => r.mode === mode && (heap === 0 ? r.heapMB < 100 : r.heapMB >= 100));
    return rs.reduce((a, r) => a + r.loopMsPerRun, 0) / rs.length;
  };
  const ok = loop('spawner', 200) * 2 <= loop('direct', 200);
  table(
    `11. spawn: an agent start's cost to gated's event loop, through the spawner vs gated itself — ${verdict(ok)}`,
    rows.map((r) => ({ ...r })),
    'through the spawner: at most half of gated itself with a 200 MB heap, flat with the heap',
  );
}

if (want('memory')) {
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: packageFile(), stdio: 'inherit' });
  const rows = [1000, 10_000].map((n) =>
    JSON.parse(
      execFileSync(process.execPath, [packageFile('bench', 'memory-child.mjs'), String(n)], {
        encoding: 'utf8',
      }),
    ),
  ) as Array<{ groups: number; rssMB: number }>;
  results.memory = rows;
  const at1k = rows.find((r) => r.groups === 1000)!.rssMB;
  table(
    `6. memory: RSS of a whole gated with N groups and sessions — ${verdict(at1k <= 150)}`,
    rows,
    'RSS ≤ 150 MB at 1k groups',
  );
}

if (want('window')) {
  const r = await benchTelegramWindow(quick ? 200 : 2000);
  results.window = r;
  table(
    `8. window: Telegram part accepted → its record committed (a kill inside sends it again)`,
    [{ ...r }],
    'report the window (ms) and the share of delivery time inside it',
  );
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

// An operator's open transaction: runs only when named (`--only=lock`); it starts the compiled CLI.
if (only?.has('lock')) {
  const { lockBench } = await import('./lock.js');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: packageFile(), stdio: 'inherit' });
  const r = await lockBench(quick ? 5000 : 15_000);
  results.lock = r;
  const ok = r.healthzFailed === 0 && r.healthzMaxMs <= 50 && r.storedInOrder;
  table(
    `12. lock: another process holds the write lock ${r.holdMs / 1000} s while the web chat posts — ${verdict(ok)}`,
    [{ ...r }],
    '/healthz within 50 ms throughout; every post stored once, in order, and answered after',
  );
}

// The nested-folder campaign takes minutes on two runtimes: it runs only when named (`--only=folders`).
if (only?.has('folders')) {
  const { folderBench } = await import('./folders.js');
  const rows = await folderBench(quick);
  results.folders = rows;
  const ok = rows.every(
    (r) =>
      r.foreignRuns === 0 &&
      r.writtenOutside.length === 0 &&
      r.uploadsInChild === r.uploads &&
      !r.decoyChanged &&
      !r.secretChanged &&
      r.chownedOutside.length === 0,
  );
  table(
    `13. folders: a parent's agent links and flips its child's old folder while messages and uploads reach the child — ${verdict(ok)}`,
    rows.map(({ foreign, writtenOutside, chownedOutside, ...r }) => ({
      ...r,
      foreign: foreign.length,
      writtenOutside: writtenOutside.length,
      chownedOutside: chownedOutside.length,
    })),
    '0 runs in a foreign folder, 0 files outside, every upload in the child, decoy and secret unchanged',
  );
}

// One 20 MiB web chat upload against the event loop: runs only when named (`--only=upload`).
if (only?.has('upload')) {
  const { uploadBench } = await import('./upload.js');
  const rows = await uploadBench(20);
  results.upload = rows;
  const now = rows.find((r) => r.how.startsWith('streamed'))!;
  table(
    `14. upload: one 20 MiB multipart upload, the event loop's longest stall — ${verdict(now.stallMaxMs <= 50)}`,
    rows.map((r) => ({ ...r })),
    'the streamed handler: longest stall ≤ 50 ms',
  );
}

// Mails of many parts read file by file: runs only when named (`--only=mailparse`).
if (only?.has('mailparse')) {
  const { mailParseBench } = await import('./mail-parse.js');
  const rows = await mailParseBench(true);
  results.mailparse = rows;
  table(
    '15. mailparse: a 990-part and a 100 × 100 KB mail, every file read as the inbox downloader reads them',
    rows.map((r) => ({ ...r })),
    'each mail parsed once',
  );
}

/** The commit of the tree measured, with `+changes` when it has uncommitted ones. */
function gitCommit(): string {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: packageFile(), encoding: 'utf8' }).trim();
  try {
    return (
      git('rev-parse', 'HEAD') + (git('status', '--porcelain', '--untracked-files=no') ? '+changes' : '')
    );
  } catch {
    return 'unknown';
  }
}

// The crash campaign takes minutes: it runs only when named (`--only=crash`).
if (only?.has('crash')) {
  const { crashCampaign } = await import('./crash.js');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: packageFile(), stdio: 'inherit' });
  const r = await crashCampaign(
    quick
      ? {
          messages: 1000,
          chats: 20,
          kills: 6,
          trafficMs: 40_000,
          drainMs: 60_000,
          compiled: true,
          steering: true,
          partFour: true,
        }
      : {
          messages: 10_000,
          chats: 60,
          kills: 18,
          trafficMs: 300_000,
          drainMs: 120_000,
          compiled: true,
          verbose: true,
          // Part three's steering and part four's asks, facts and voice notes, mixed into the same kills.
          steering: true,
          partFour: true,
        },
  );
  results.crash = r;
  const p4 = r.partFour;
  const ok =
    r.neverAnswered === 0 &&
    r.answeredTwice === 0 &&
    r.notStored === 0 &&
    r.kills >= (quick ? 6 : 20) &&
    p4 !== undefined &&
    (p4.asks.pending ?? 0) === 0 &&
    p4.answeredTwice === 0 &&
    p4.factsTwice === 0 &&
    p4.factsMissing === 0 &&
    p4.voice.neverAnswered === 0 &&
    p4.voice.answeredTwice === 0 &&
    p4.voice.transcribed === p4.voice.sent;
  table(
    `7. crash: ${r.messages} messages over ${r.chats} chats, gated SIGKILLed ${r.kills} times — ${verdict(ok)}`,
    [{ ...r }],
    '0 lost, 0 answered twice; parts sent twice only in the Telegram window',
  );
  if (!quick) {
    writeFileSync(
      packageFile('bench', 'results', 'crash.json'),
      JSON.stringify({ date: new Date().toISOString(), commit: gitCommit(), machine, crash: r }, null, 2) +
        '\n',
    );
  }
}

mkdirSync(packageFile('bench', 'results'), { recursive: true });
const file = packageFile(
  'bench',
  'results',
  `${new Date().toISOString().replace(/[:.]/g, '-')}${quick ? '-quick' : ''}.json`,
);
writeFileSync(
  file,
  JSON.stringify({ date: new Date().toISOString(), quick, machine, results }, null, 2) + '\n',
);
console.log(`\nresults written to ${file}`);
