/**
 * The crash campaign (bench/README.md): a whole gated process under steady traffic, killed with SIGKILL
 * again and again at random moments (while it runs, inside delivery, during its startup recovery), its
 * agents killed with it, restarted each time. Afterwards every message and every outbound row is checked:
 * answered once, twice or never; delivered once, twice or never.
 *
 * The parts are real: the gated CLI as its own process on a real SQLite file, the process runtime running
 * bench/crash-agent.mjs (slow, sometimes failing or hanging), the Telegram channel talking to the local
 * Bot API server (test/infra/telegram-api.ts), which records every message the bot sends. Half of the
 * messages come through that channel (updates gated fetches), half from an external writer process that
 * inserts rows the way another adapter would.
 *
 * To look into a failed campaign: CRASH_KEEP=1 keeps its folder (database, gated's log, the agents' events)
 * when a message was answered twice or never and prints where; CRASH_LOG_LEVEL sets gated's log level.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { packageFile } from '../core/paths.js';
import { openDatabase } from '../store/db.js';
import { addGroup } from '../store/groups.js';
import { addRoute } from '../store/routes.js';
import { TelegramApiServer } from '../test/infra/telegram-api.js';
import { toVoiceNote } from '../voice/audio.js';

/** Size and pace of a campaign. */
export interface CrashOptions {
  /** Messages in all (half through the channel, half from the external writer). */
  messages: number;
  chats: number;
  /** Kill rounds; a 'startup' round kills twice (once more while the restarted gated recovers). */
  kills: number;
  /** How long the traffic lasts; kills are spread over it. */
  trafficMs: number;
  /** After the traffic: how long the last gated may take to answer and deliver everything. */
  drainMs: number;
  /**
   * A restarted gated not healthy after this long (ms) fails the campaign, saying why: its last /healthz
   * answer and the end of its stderr. Default 120 s.
   */
  recoveryBoundMs?: number;
  /** Progress lines (stderr) while it runs. */
  verbose?: boolean;
  /** Run the compiled gated (dist/, `npm run build` first) instead of the sources through tsx. */
  compiled?: boolean;
  /**
   * Steering mixed in (docs/PROTOCOL.md): the groups' busy modes alternate steer and interrupt (queue for the
   * agents that predate turns), a third of the channel's messages are `/interrupt <text>`, and a bare
   * `/interrupt` now and then.
   */
  steering?: boolean;
  /**
   * Part four mixed in (crash-agent.mjs, CRASH_PART_FOUR): turns that ask about a shell call and wait for a
   * person (an admin types `/approve CODE` in the chat 0.2–2 s after the ask appears, so kills land while
   * asks are pending), and blocks that remember facts (`remember` actions).
   */
  partFour?: boolean;
  /**
   * With partFour: a turn asks when its first token is a multiple of this (default 7). A small campaign
   * on a loaded machine has few turns (more messages batched into each), so its test asks more often.
   */
  askEvery?: number;
  /**
   * With partFour: one channel message in this many (default 25; 0: none) is a voice note (espeak-ng's
   * speech as Ogg/Opus) captioned with its token, which the real pocketsphinx transcribes
   * (GATED_TRANSCRIBE_CMD=pocketsphinx) while the kills go on: each must be transcribed once and answered
   * once, its token kept beside the words.
   */
  voiceEvery?: number;
}

/** With part four: what became of the voice notes. */
export interface VoiceReport {
  /** Voice notes sent through the channel. */
  sent: number;
  /** Their rows whose content is a transcript (`transcript = 1`), and whose transcript has the sentence's words. */
  transcribed: number;
  heard: number;
  /** Their transcription rows by state (done, failed, refused, pending: pending must be 0 at the end). */
  transcriptions: Record<string, number>;
  /** Their tokens answered once, twice (must be 0) and never (must be 0). */
  answeredOnce: number;
  answeredTwice: number;
  neverAnswered: number;
}

/** With part four: what became of the asks and the facts. */
export interface PartFourReport {
  /** Asks by their end state in tool_approvals (approved, cancelled, expired, pending, …). */
  asks: Record<string, number>;
  /** Asks pending at the moments of the kills, summed over the kills. */
  pendingAtKills: number;
  /** /approve lines the admin typed. */
  approvesTyped: number;
  /** Asks the agents made, and those that got more than one permission line (must be 0). */
  asked: number;
  answeredTwice: number;
  /** Facts: tokens remembered once, more than once (must be 0), and applied `remember`s without their fact (must be 0). */
  factsOnce: number;
  factsTwice: number;
  factsMissing: number;
  /** `remember` actions by status and reason (a refusal says why a fact is missing). */
  remembers: Record<string, number>;
  voice: VoiceReport;
}

/** What a campaign found. */
export interface CrashReport {
  messages: number;
  chats: number;
  /** SIGKILLs of gated (with its agents). */
  kills: number;
  killKinds: Record<string, number>;
  wallSeconds: number;
  /** Per message (token): how many stored replies name it. */
  answeredOnce: number;
  answeredTwice: number;
  neverAnswered: number;
  /** Messages the platform or writer produced that never became a row (should be 0). */
  notStored: number;
  /** Per outbound row: how many sends of it the platform recorded. */
  outboundRows: number;
  deliveredOnce: number;
  deliveredTwice: number;
  neverDelivered: number;
  /** Time from a SIGKILL to the restarted gated answering /healthz with 200 (ms). */
  recoveryP50ms: number;
  recoveryMaxMs: number;
  recoveries: number;
  recoveryMs: number[];
  /** The slowest recovery: its kill kind and the last reason /healthz gave before it answered 200. */
  slowestRecovery: { ms: number; kind: string; waitedOn: string };
  runs: number;
  runsFailed: number;
  runsTimedOut: number;
  runsInterrupted: number;
  /** With steering: turns the agents answered early because gated interrupted them, and steered lines. */
  interruptedTurns: number;
  steeredLines: number;
  /**
   * Messages never answered (the first 20): the row's state and gate columns, to tell a lost row (held with
   * nothing to release it, say) from a drain that ran out of time.
   */
  unanswered: Array<{ token: string } & Record<string, unknown>>;
  /** Rows still open when the drain ended (0 unless it ran out of time). */
  stillOpen: number;
  partFour?: PartFourReport;
}

const TOKEN = '123456:CRASH-token';
/** The admin who decides the asks of a part-four campaign (GATED_ADMINS). */
const ADMIN = 9999;
/** The Telegram user of chat c is CHANNEL_USER + c. */
const CHANNEL_USER = 5000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** What the campaign's voice notes say: a sentence Debian's pocketsphinx hears from espeak-ng word for word. */
const SPOKEN = 'please check the weather tomorrow';
const HEARD = ['check', 'weather', 'tomorrow'];

/** SPOKEN as an Ogg/Opus voice note, made once per campaign in its folder. */
async function voiceNoteIn(dir: string): Promise<Buffer> {
  const wav = join(dir, 'speech.wav');
  const ogg = join(dir, 'speech.ogg');
  execFileSync('espeak-ng', ['-w', wav, SPOKEN]);
  await toVoiceNote(wav, ogg, 30_000);
  return readFileSync(ogg);
}
const chatId = (c: number) => -1_000_000 - c;

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

function exitOf(c: ChildProcess): Promise<unknown> {
  return c.exitCode !== null || c.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => c.once('exit', r));
}

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** Runs one campaign and returns its report. */
export async function crashCampaign(o: CrashOptions): Promise<CrashReport> {
  const recoveryBound = o.recoveryBoundMs ?? 120_000;
  const say = (s: string) => o.verbose && process.stderr.write(`[crash] ${s}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'gated-crash-'));
  const dbPath = join(dir, 'gated.db');
  const groupsDir = join(dir, 'groups');
  const pidsDir = join(dir, 'pids');
  const eventsFile = join(dir, 'agent-events.log');
  mkdirSync(pidsDir);
  const api = await TelegramApiServer.start(TOKEN);
  const port = await freePort();
  const voiceEvery = o.partFour ? (o.voiceEvery ?? 25) : 0;
  const note = voiceEvery > 0 ? await voiceNoteIn(dir) : undefined;
  /** The tokens sent as voice notes. */
  const voiced = new Set<string>();

  const seed = openDatabase(dbPath);
  for (let c = 0; c < o.chats; c++) {
    addGroup(seed, groupsDir, `c${c}`);
    addRoute(seed, { seq: c, match: `platform=telegram room=${chatId(c)}`, target: `c${c}` });
    if (o.steering) {
      // Agents that number their turns alternate steer and interrupt; those that predate turns (one group
      // in five, see crash-agent.mjs) get neither line whatever the mode, so they stay in queue mode.
      const numbered = !/[05]$/.test(String(c));
      const busy = numbered ? (c % 2 === 1 ? 'steer' : 'interrupt') : 'queue';
      seed.prepare(`UPDATE registered_groups SET busy = ? WHERE folder = ?`).run(busy, `c${c}`);
    }
    api.addChat({ id: chatId(c), type: 'group', title: `chat ${c}` });
  }
  seed.close();

  const env = {
    ...process.env,
    GATED_DB: dbPath,
    GATED_GROUPS_DIR: groupsDir,
    GATED_HTTP_PORT: String(port),
    GATED_POLL_MS: '2000',
    GATED_IDLE_TIMEOUT_MS: '1500',
    GATED_RUN_TIMEOUT_MS: '8000',
    GATED_MAX_CONCURRENT: '12',
    GATED_RUNTIME: 'process',
    // The campaign's agent writes its pid and events outside its folder for the harness to read, which an
    // agent under the process runtime's own unprivileged uid rightly cannot: it runs as gated's user here.
    GATED_PROCESS_USER: 'root',
    GATED_LOG_LEVEL: process.env.CRASH_LOG_LEVEL ?? 'error',
    GATED_AGENT_CMD: `CRASH_PIDS='${pidsDir}' CRASH_EVENTS='${eventsFile}' CRASH_PART_FOUR=${o.partFour ? 1 : 0} CRASH_ASK_EVERY=${o.askEvery ?? 7} exec node '${packageFile('bench', 'crash-agent.mjs')}'`,
    ...(o.partFour ? { GATED_ADMINS: `telegram:${ADMIN}` } : {}),
    ...(note ? { GATED_TRANSCRIBE_CMD: 'pocketsphinx' } : {}),
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: api.url,
  };
  let gated: ChildProcess | undefined;
  // What the gated processes printed last: a restart that never becomes healthy says why with it.
  let stderrTail = '';
  const startGated = () => {
    const cli = o.compiled
      ? [packageFile('dist', 'gated', 'cli.js')]
      : ['--import', 'tsx', packageFile('gated', 'cli.ts')];
    gated = spawn(process.execPath, [...cli, 'run'], {
      env,
      stdio: ['ignore', process.env.CRASH_KEEP ? openSync(join(dir, 'gated.log'), 'a') : 'ignore', 'pipe'],
    });
    gated.stderr!.on('data', (d) => {
      stderrTail = (stderrTail + String(d)).slice(-4000);
      if (o.verbose) process.stderr.write(`[gated] ${d}`);
    });
    return gated;
  };
  const killAll = () => {
    gated?.kill('SIGKILL');
    // Agents die with gated, as they would with the machine: each is its own process group.
    for (const pid of readdirSync(pidsDir)) {
      try {
        process.kill(-Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
      rmSync(join(pidsDir, pid), { force: true });
    }
  };
  // The last reason /healthz gave for not being healthy: what a slow recovery waited on.
  let unhealthy = '';
  const healthy = async (): Promise<boolean> => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(500) });
      if (res.status !== 200) unhealthy = (await res.text()).slice(0, 300);
      return res.status === 200;
    } catch (err) {
      unhealthy = (err as Error).message;
      return false;
    }
  };

  const started = Date.now();
  startGated();

  // Traffic: the external writer (its own process) and the channel (updates the bot fetches).
  const half = Math.floor(o.messages / 2);
  const writer = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      packageFile('bench', 'crash-writer.ts'),
      dbPath,
      String(o.chats),
      String(half),
      String(o.trafficMs),
      // With part four each chat is one person (the channel's user): a fact is one stranger's, and a turn
      // of two (the writer's and the channel's) is refused one; how many turns mix them is the load's doing.
      ...(o.partFour ? [String(CHANNEL_USER)] : []),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const writerDone = new Promise((r) => writer.once('exit', r));
  let killsOver = (): void => {};
  const killsDone = new Promise<void>((r) => (killsOver = r));
  const channelDone = (async () => {
    const n = o.messages - half;
    for (let i = 0; i < n; i++) {
      // With steering, the last third goes to the gated that survived the kills: on a loaded machine the
      // restarts can fill the whole traffic window, and a turn that never runs is never interrupted.
      if (o.steering && i === Math.floor((2 * n) / 3)) await killsDone;
      const c = i % o.chats;
      const chat = { id: chatId(c), type: 'group' as const, title: `chat ${c}` };
      const from = { id: CHANNEL_USER + c, is_bot: false, first_name: `user${c}` };
      // Every third round of the chats, not every third message (which would always hit the same chats).
      const steer = o.steering && Math.floor(i / o.chats) % 3 === 1;
      const text = `${steer ? '/interrupt ' : ''}hello tok-${half + i}`;
      // One message in voiceEvery (never a steering one: a caption is not a command) is a voice note.
      if (note && !steer && i % voiceEvery === voiceEvery - 1) {
        voiced.add(`tok-${half + i}`);
        api.message({ chat, from, text, file: { kind: 'voice', data: note } });
      } else api.message({ chat, from, text });
      // A bare /interrupt (answered by the gateway, no token) now and then.
      if (o.steering && i % 10 === 7) api.message({ chat, from, text: '/interrupt' });
      await sleep(o.trafficMs / n);
    }
  })();

  // Part four: the admin approves each ask that appears, after a while (a person reads it first).
  let approving = true;
  let approvesTyped = 0;
  let pendingAtKills = 0;
  const pendingAsks = (): number => {
    const d = new Database(dbPath, { readonly: true });
    try {
      d.pragma('busy_timeout = 5000');
      return d.prepare(`SELECT count(*) FROM tool_approvals WHERE state = 'pending'`).pluck().get() as number;
    } finally {
      d.close();
    }
  };
  const approverDone = (async () => {
    if (!o.partFour) return;
    const typed = new Set<string>();
    const seen = new Database(dbPath, { readonly: true, fileMustExist: true });
    seen.pragma('busy_timeout = 5000');
    const pending = seen.prepare(`SELECT code, chat_jid FROM tool_approvals WHERE state = 'pending'`);
    try {
      while (approving) {
        for (const a of pending.all() as Array<{ code: string; chat_jid: string }>) {
          if (typed.has(a.code)) continue;
          typed.add(a.code);
          const id = Number(a.chat_jid.split(':')[1]);
          setTimeout(
            () => {
              approvesTyped++;
              api.message({
                chat: { id, type: 'group', title: 'chat' },
                from: { id: ADMIN, is_bot: false, first_name: 'admin' },
                text: `/approve ${a.code}`,
              });
            },
            200 + Math.random() * 1800,
          );
        }
        await sleep(200);
      }
    } finally {
      seen.close();
    }
  })();

  // Kills, spread over the traffic: a third at a random moment, a third right after a reply reached the
  // platform (inside delivery), a third while the restarted gated is still starting and recovering.
  const recoveries: number[] = [];
  const killKinds: Record<string, number> = { random: 0, delivery: 0, startup: 0 };
  let sigkills = 0;
  let slowest = { ms: 0, kind: '', waitedOn: '' };
  const gap = o.trafficMs / (o.kills + 1);
  for (let k = 0; k < o.kills; k++) {
    const kind = (['random', 'delivery', 'startup'] as const)[k % 3]!;
    await sleep(gap * (0.5 + Math.random()));
    if (kind === 'delivery') {
      const seen = api.sent.length;
      await Promise.race([api.waitForSent(seen + 1), sleep(5000)]);
    } else if (kind === 'startup') {
      // A first kill at this moment; the counted one then hits the restarted gated while it recovers.
      killKinds.random!++;
      sigkills++;
      killAll();
      await exitOf(gated!);
      startGated();
      await sleep(100 + Math.random() * 1500);
    }
    if (o.partFour && kind === 'random') {
      // A random kill with part four lands while an ask waits for its person, when one comes within
      // 20 s: a loaded machine makes few turns, and a kill that never meets a pending ask proves nothing.
      const until = Date.now() + 20_000;
      while (pendingAsks() === 0 && Date.now() < until) await sleep(50);
    }
    killKinds[kind]!++;
    sigkills++;
    if (o.partFour) pendingAtKills += pendingAsks();
    const killedAt = Date.now();
    killAll();
    await exitOf(gated!);
    startGated();
    unhealthy = '';
    while (!(await healthy())) {
      if (Date.now() - killedAt > recoveryBound) {
        const exited = gated!.exitCode ?? gated!.signalCode;
        killAll();
        if (writer.exitCode === null) writer.kill('SIGKILL');
        await api.close();
        throw new Error(
          `after kill ${k + 1} (${kind}) gated was not healthy within ${recoveryBound} ms` +
            ` (${exited === null ? 'still running' : `exited: ${exited}`}; last /healthz: ${unhealthy}); ` +
            `its stderr ended with: ${stderrTail.slice(-1500)} (folder ${dir})`,
        );
      }
      await sleep(25);
    }
    recoveries.push(Date.now() - killedAt);
    if (recoveries.at(-1)! > slowest.ms) slowest = { ms: recoveries.at(-1)!, kind, waitedOn: unhealthy };
    say(`kill ${k + 1}/${o.kills} (${kind}): healthy again after ${recoveries.at(-1)} ms`);
  }
  killsOver();
  await Promise.all([writerDone, channelDone]);
  say('traffic done; draining');

  const watch = new Database(dbPath, { readonly: true });
  watch.pragma('busy_timeout = 5000');
  const count = (sql: string) => watch.prepare(sql).pluck().get() as number;
  const deadline = Date.now() + o.drainMs;
  const openRows = () =>
    count(
      `SELECT count(*) FROM messages WHERE (is_from_me = 0 AND (state IS NULL OR state NOT IN ('done', 'parked', 'stopped', 'command'))) OR (is_from_me = 1 AND delivery = 'pending')`,
    );
  while (Date.now() < deadline) {
    // Rows with a token (a bare /interrupt has none and is not counted).
    const stored = count(`SELECT count(*) FROM messages WHERE is_from_me = 0 AND content LIKE '%tok-%'`);
    const asking = o.partFour ? count(`SELECT count(*) FROM tool_approvals WHERE state = 'pending'`) : 0;
    if (openRows() === 0 && stored >= o.messages && asking === 0) break;
    await sleep(250);
  }
  const stillOpen = openRows();
  approving = false;
  await approverDone;
  gated!.kill('SIGTERM');
  await exitOf(gated!);
  killAll();

  // Per message: the replies that name its token.
  const answered = new Map<string, number>();
  for (const content of watch
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
    .pluck()
    .all() as string[]) {
    for (const tok of content.match(/tok-\d+/g) ?? []) answered.set(tok, (answered.get(tok) ?? 0) + 1);
  }
  const stored = new Set(
    (watch.prepare(`SELECT content FROM messages WHERE is_from_me = 0`).pluck().all() as string[]).flatMap(
      (c) => c.match(/tok-\d+/g) ?? [],
    ),
  );
  let once = 0;
  let twice = 0;
  let never = 0;
  let notStored = 0;
  const unanswered: CrashReport['unanswered'] = [];
  const rowOf = watch.prepare(
    `SELECT id, chat_jid, state, error, group_folder, weight, threshold, max_hold_ms, held_at, ready_at
     FROM messages WHERE is_from_me = 0 AND content LIKE ?`,
  );
  for (let i = 0; i < o.messages; i++) {
    const n = answered.get(`tok-${i}`) ?? 0;
    if (!stored.has(`tok-${i}`)) notStored++;
    if (n === 0 && unanswered.length < 20) {
      unanswered.push({
        token: `tok-${i}`,
        ...(rowOf.get(`%tok-${i}`) as Record<string, unknown> | undefined),
      });
    }
    if (n === 0) never++;
    else if (n === 1) once++;
    else twice++;
  }
  // Per outbound row: the platform's sends that carry its nonce.
  const sends = new Map<string, number>();
  for (const m of api.sent) {
    const nonce = /r-[0-9a-f]{12}/.exec(m.text)?.[0];
    if (nonce) sends.set(nonce, (sends.get(nonce) ?? 0) + 1);
  }
  const rows = watch
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
    .pluck()
    .all() as string[];
  let dOnce = 0;
  let dTwice = 0;
  let dNever = 0;
  for (const content of rows) {
    const n = sends.get(/r-[0-9a-f]{12}/.exec(content)?.[0] ?? '') ?? 0;
    if (n === 0) dNever++;
    else if (n === 1) dOnce++;
    else dTwice++;
  }
  const agentEvents = existsSync(eventsFile) ? readFileSync(eventsFile, 'utf8').split('\n') : [];
  const report: CrashReport = {
    messages: o.messages,
    chats: o.chats,
    kills: sigkills,
    killKinds,
    wallSeconds: Math.round((Date.now() - started) / 100) / 10,
    answeredOnce: once,
    answeredTwice: twice,
    neverAnswered: never,
    notStored,
    outboundRows: rows.length,
    deliveredOnce: dOnce,
    deliveredTwice: dTwice,
    neverDelivered: dNever,
    recoveryP50ms: percentile(recoveries, 50),
    recoveryMaxMs: Math.max(0, ...recoveries),
    recoveries: recoveries.length,
    recoveryMs: recoveries,
    slowestRecovery: slowest,
    runs: count(`SELECT count(*) FROM session_log`),
    runsFailed: count(`SELECT count(*) FROM session_log WHERE error LIKE 'exit code%'`),
    runsTimedOut: count(`SELECT count(*) FROM session_log WHERE result = 'timeout'`),
    runsInterrupted: count(`SELECT count(*) FROM session_log WHERE error LIKE 'interrupted%'`),
    interruptedTurns: agentEvents.filter((e) => e === 'interrupted').length,
    steeredLines: agentEvents.filter((e) => e === 'steered').length,
    unanswered,
    stillOpen,
    ...(o.partFour
      ? {
          partFour: {
            ...partFourOf(watch, agentEvents, approvesTyped),
            pendingAtKills,
            voice: voiceOf(watch, voiced, answered),
          },
        }
      : {}),
  };
  watch.close();
  await api.close();
  if (process.env.CRASH_KEEP && (never || twice)) process.stderr.write(`KEPT ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
  return report;
}

/** What became of a part-four campaign's asks and facts (CrashOptions.partFour). */
function partFourOf(
  db: Database.Database,
  events: string[],
  approvesTyped: number,
): Omit<PartFourReport, 'pendingAtKills' | 'voice'> {
  const asks: Record<string, number> = {};
  for (const r of db
    .prepare(`SELECT state, count(*) AS n FROM tool_approvals GROUP BY state`)
    .all() as Array<{
    state: string;
    n: number;
  }>)
    asks[r.state] = r.n;
  const permissions = new Map<string, number>();
  let asked = 0;
  for (const e of events) {
    const [word, id] = e.split(' ');
    if (word === 'asked') asked++;
    if (word === 'permission' && id) permissions.set(id, (permissions.get(id) ?? 0) + 1);
  }
  const facts = new Map<string, number>();
  for (const text of db.prepare(`SELECT text FROM memories`).pluck().all() as string[]) {
    const tok = /^fact (tok-\d+)$/.exec(text)?.[1];
    if (tok) facts.set(tok, (facts.get(tok) ?? 0) + 1);
  }
  // Each applied `remember` made its fact in the block's transaction; one whose fact is not there was lost.
  // (A turn of several strangers is refused: a fact is one stranger's. Counted in `remembers`.)
  let missing = 0;
  for (const payload of db
    .prepare(`SELECT payload FROM actions WHERE type = 'remember' AND status = 'applied'`)
    .pluck()
    .all() as string[]) {
    const tok = /fact (tok-\d+)/.exec(payload)?.[1];
    if (tok && !facts.has(tok)) missing++;
  }
  const remembers: Record<string, number> = {};
  for (const r of db
    .prepare(
      `SELECT status || ' ' || coalesce(reason, '') AS k, count(*) AS n FROM actions WHERE type = 'remember' GROUP BY k`,
    )
    .all() as Array<{ k: string; n: number }>)
    remembers[r.k.trim()] = r.n;
  return {
    asks,
    approvesTyped,
    remembers,
    asked,
    answeredTwice: [...permissions.values()].filter((n) => n > 1).length,
    factsOnce: [...facts.values()].filter((n) => n === 1).length,
    factsTwice: [...facts.values()].filter((n) => n > 1).length,
    factsMissing: missing,
  };
}

/** What became of the voice notes (CrashOptions.voiceEvery): their rows, transcriptions and answers. */
function voiceOf(db: Database.Database, voiced: Set<string>, answered: Map<string, number>): VoiceReport {
  const report: VoiceReport = {
    sent: voiced.size,
    transcribed: 0,
    heard: 0,
    transcriptions: {},
    answeredOnce: 0,
    answeredTwice: 0,
    neverAnswered: 0,
  };
  const rows = db
    .prepare(
      `SELECT m.content, m.transcript, t.state FROM messages m JOIN transcriptions t ON t.message_id = m.id
       WHERE m.is_from_me = 0`,
    )
    .all() as Array<{ content: string; transcript: number | null; state: string }>;
  const rowOf = new Map<string, (typeof rows)[number]>();
  for (const r of rows) for (const tok of r.content.match(/tok-\d+/g) ?? []) rowOf.set(tok, r);
  for (const tok of voiced) {
    const row = rowOf.get(tok);
    const state = row?.state ?? 'none';
    report.transcriptions[state] = (report.transcriptions[state] ?? 0) + 1;
    if (row?.transcript === 1) report.transcribed++;
    if (row && HEARD.every((w) => row.content.includes(w))) report.heard++;
    const n = answered.get(tok) ?? 0;
    if (n === 0) report.neverAnswered++;
    else if (n === 1) report.answeredOnce++;
    else report.answeredTwice++;
  }
  return report;
}
