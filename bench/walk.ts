/**
 * The coverage walk (docs/ARCHITECTURE.md, "The life of one Telegram message"): which of gated's functions
 * one Telegram message runs, and which one approval round trip runs, measured with V8's precise coverage
 * of the code compiled file by file (`dist/walk/`, by tsc first unless `--no-build`: the bundle `npm start`
 * runs would merge the files counted by). The compiled gated runs in a process of
 * its own (bench/walk-child.mjs, NODE_V8_COVERAGE set) against the local Bot API, the process runtime and
 * an agent that answers at once and asks when told to (test/queue/agents/ask-agent.mjs). The counts are
 * reset right before each walk and written right after it, so start-up is not counted; the poll interval
 * is a minute, so no timer of gated's runs inside a walk. Two passes that keep their own time, on no
 * message's path, are off: the history indexer's (each second, GATED_HISTORY_INDEX=0) and the owner row's
 * heartbeat (every 5 s; the child starts with `exclusive: false`). Either, falling inside a walk, added its
 * pass to it (415 functions in 79 files instead of 409 in 78, now and then). And both walks are made
 * once before the counts are reset, in a chat of another group: the first message's cold code (parsed and
 * compiled as it first runs) made its turn long enough, on a loaded machine, that the scheduler left the
 * run's start to a pump of its own (`later`, three functions more, now and then).
 *
 * 1. message: a private chat's "hello" → the agent's answer delivered to the chat.
 * 2. approval: a message whose agent asks about a `Bash` call (the group's rule: ask) → the question with
 *    its buttons in the chat → the owner's typed `/approve CODE` → the agent's answer delivered and the
 *    question edited to say who decided.
 *
 * Printed per walk: functions run and files touched under dist/walk/, then per folder and per file, and
 * its wakes (`wakes` below): the poll-loop steps, outbox scans and scheduler pumps, and how often the
 * commit watcher looked and woke the stages.
 *
 *   npx tsx bench/walk.ts [--no-build] [--files]
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Chat, User } from 'telegraf/types';
import { packageFile } from '../core/paths.js';
import { openDatabase } from '../store/db.js';
import { addGroup } from '../store/groups.js';
import { TelegramApiServer } from '../test/infra/telegram-api.js';

const chat: Chat.PrivateChat = { id: 7001, type: 'private', first_name: 'Ada' };
const ada: User = { id: 7001, is_bot: false, first_name: 'Ada' };
/** The warm-up's chat, routed to a group of its own (`warm`): its runs never share the walks' session. */
const warmChat: Chat.PrivateChat = { id: 7002, type: 'private', first_name: 'Bea' };
const bea: User = { id: 7002, is_bot: false, first_name: 'Bea' };

interface FunctionCoverage {
  functionName: string;
  ranges: Array<{ startOffset: number; endOffset: number; count: number }>;
}
interface ScriptCoverage {
  url: string;
  functions: FunctionCoverage[];
}

/** What one walk ran: per file under dist/walk/, the names of the functions that ran. */
export type Walk = Map<string, string[]>;
/** How often each function of one walk ran, by `file:name` (the poll loop's steps are `gateway/loop.js:step`). */
export type Calls = Map<string, number>;

async function until<T>(fn: () => T | undefined | null | false, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The functions of dist/walk/ that ran in one coverage file. */
function walkOf(file: string, dist: string, calls?: Calls): Walk {
  const { result } = JSON.parse(readFileSync(file, 'utf8')) as { result: ScriptCoverage[] };
  const out: Walk = new Map();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(dist + sep)) continue;
    // A function's first range is the function itself: its count is how often it was called.
    const ran = script.functions.filter((f) => (f.ranges[0]?.count ?? 0) > 0 && f.ranges[0]!.startOffset > 0);
    for (const f of ran) {
      const key = `${relative(dist, path)}:${f.functionName || '(anonymous)'}`;
      calls?.set(key, (calls.get(key) ?? 0) + f.ranges[0]!.count);
    }
    if (ran.length > 0)
      out.set(
        relative(dist, path),
        ran.map((f) => f.functionName || '(anonymous)'),
      );
  }
  return out;
}

function report(title: string, walk: Walk, files: boolean): string {
  const lines: string[] = [];
  const total = [...walk.values()].reduce((n, f) => n + f.length, 0);
  lines.push(`${title}: ${total} functions in ${walk.size} files`);
  const byFolder = new Map<string, { functions: number; files: number }>();
  for (const [file, fns] of walk) {
    const parts = file.split(sep);
    const folder = parts[0] === 'channels' ? `channels/${parts[1]}` : parts[0]!;
    const f = byFolder.get(folder) ?? { functions: 0, files: 0 };
    f.functions += fns.length;
    f.files += 1;
    byFolder.set(folder, f);
  }
  for (const [folder, f] of [...byFolder].sort((a, b) => b[1].functions - a[1].functions))
    lines.push(
      `  ${folder.padEnd(18)} ${String(f.functions).padStart(4)} functions ${String(f.files).padStart(3)} files`,
    );
  if (files)
    for (const [file, fns] of [...walk].sort((a, b) => a[0].localeCompare(b[0])))
      lines.push(`    ${file} (${fns.length}): ${fns.join(', ')}`);
  return lines.join('\n');
}

/**
 * Who woke whom in one walk, counted from the functions that run once per wake: a poll-loop step calls
 * `releaseDue` once (its `step` name is also the driver's arrow that calls it), delivery's outbox scan is
 * its worker's `step`, a scheduler pass is `pump`. The commit watcher `look`s after each burst of writes
 * to the WAL file (one look per 2 ms at most), gated's own commits included, and wakes the stages
 * (`wakeAll`) only for another connection's commit (data_version): a wake of it here is gated waking itself.
 */
export function wakes(calls: Calls): string {
  const n = (key: string): number => calls.get(key) ?? 0;
  return [
    `  wakes: ${n('core/worker.js:runNow')} worker steps (poll loop ${n('gateway/loop.js:releaseDue')},`,
    `outbox scan ${n('delivery/delivery.js:step')}), ${n('queue/scheduler.js:pump')} scheduler pumps;`,
    `commit watcher ${n('gateway/watch.js:look')} looks, ${n('gateway/watch.js:wakeAll')} wakes`,
  ].join(' ');
}

/** One message in `to` from `from`, until the agent's answer is sent. */
async function messageWalk(tg: TelegramApiServer, to: Chat.PrivateChat, from: User): Promise<void> {
  const n = tg.sent.length;
  tg.message({ chat: to, from, text: 'hello' });
  await until(
    () => tg.sent.slice(n).find((m) => m.chat_id === to.id && m.text.includes('did turn')),
    30_000,
    'the answer',
  );
}

/** A message whose agent asks, the question, `/approve CODE`, the answer, and the question edited. */
async function approvalWalk(tg: TelegramApiServer, to: Chat.PrivateChat, from: User): Promise<void> {
  const n = tg.sent.length;
  const ask = { tool: 'Bash', input: { command: 'touch x' }, summary: 'a file' };
  tg.message({ chat: to, from, text: `!ask ${JSON.stringify(ask)}` });
  const question = await until(
    () => tg.sent.slice(n).find((m) => m.chat_id === to.id && /\/approve [A-Z0-9]{5}/.test(m.text)),
    30_000,
    'the question',
  );
  const code = /\/approve ([A-Z0-9]{5})/.exec(question.text)![1]!;
  tg.message({ chat: to, from, text: `/approve ${code}` });
  await until(
    () => tg.sent.slice(n).find((m) => m.chat_id === to.id && m.text.includes('tool Bash ran')),
    30_000,
    'the answer',
  );
  await until(
    () => tg.edits.find((e) => e.chat_id === to.id && e.message_id === question.message_id),
    30_000,
    'the question edited',
  );
}

/** Runs both walks; returns them. */
export async function coverageWalk(
  build = true,
): Promise<{ message: Walk; approval: Walk; messageCalls: Calls; approvalCalls: Calls }> {
  const dist = packageFile('dist', 'walk');
  if (build)
    execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', dist], {
      cwd: packageFile(),
      stdio: 'inherit',
    });
  const dir = mkdtempSync(join(tmpdir(), 'gated-walk-'));
  const coverage = join(dir, 'coverage');
  let tg: TelegramApiServer | undefined;
  let child: ChildProcess | undefined;
  // Everything after the folder exists is inside the try, so that a failed start (the local Bot API, the
  // database, the fork) removes it too.
  try {
    mkdirSync(coverage);
    tg = await TelegramApiServer.start();
    tg.addChat(chat);
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? dir,
      GATED_DB: join(dir, 'gated.db'),
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_CONFIG_DIR: join(dir, 'config'),
      GATED_POLL_MS: '60000',
      GATED_ADMINS: `${ada.id},${bea.id}`,
      GATED_AGENT_CMD: `THINK_MS=0 exec node '${packageFile('test', 'queue', 'agents', 'ask-agent.mjs')}'`,
      GATED_IDLE_TIMEOUT_MS: '600000',
      GATED_HISTORY_DAYS: '0',
      GATED_HISTORY_INDEX: '0',
      TELEGRAM_BOT_TOKEN: tg.token,
      TELEGRAM_API_ROOT: tg.url,
      NODE_V8_COVERAGE: coverage,
    };
    const db = openDatabase(env.GATED_DB);
    addGroup(db, env.GATED_GROUPS_DIR, 'ops', 'Ops');
    addGroup(db, env.GATED_GROUPS_DIR, 'warm', 'Warm-up');
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'room=${warmChat.id}', 'warm')`).run();
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, 'platform=telegram', 'ops')`).run();
    for (const group of ['ops', 'warm'])
      db.prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES (?, 1, 'Bash', 'ask')`,
      ).run(group);
    db.close();
    const gated = (child = fork(packageFile('bench', 'walk-child.mjs'), [dist], { env, stdio: 'inherit' }));
    const said: string[] = [];
    gated.on('message', (m) => said.push(String(m)));
    const mark = async (): Promise<string> => {
      const n = said.filter((m) => m === 'marked').length;
      const before = new Set(readdirSync(coverage));
      gated.send('mark');
      await until(() => said.filter((m) => m === 'marked').length > n, 10_000, 'the coverage mark');
      const file = readdirSync(coverage).find((f) => !before.has(f) && f.includes(`-${gated.pid}-`));
      if (!file) throw new Error('no coverage file written');
      return join(coverage, file);
    };
    await until(
      () => {
        if (gated.exitCode !== null || gated.signalCode !== null)
          throw new Error(`gated exited (${gated.exitCode ?? gated.signalCode}) before it was ready`);
        return said.includes('ready');
      },
      60_000,
      'gated to start',
    );
    await tg.waitForPoll();
    // Settle: whatever the start left running (the first poll, the channel's first getUpdates) ends first.
    await new Promise((r) => setTimeout(r, 500));
    // The warm-up: both walks once in the other group's chat, uncounted.
    await messageWalk(tg, warmChat, bea);
    await approvalWalk(tg, warmChat, bea);
    await new Promise((r) => setTimeout(r, 200));
    await mark();
    await messageWalk(tg, chat, ada);
    await new Promise((r) => setTimeout(r, 200));
    const messageCalls: Calls = new Map();
    const message = walkOf(await mark(), dist, messageCalls);
    await approvalWalk(tg, chat, ada);
    await new Promise((r) => setTimeout(r, 200));
    const approvalCalls: Calls = new Map();
    const approval = walkOf(await mark(), dist, approvalCalls);
    return { message, approval, messageCalls, approvalCalls };
  } finally {
    if (child) await stopChild(child);
    await tg?.close();
    await writersGone(coverage);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Stops the walk's gated and waits for its exit; one that does not stop within 10 s is killed. A child
 * that has already exited (it failed to start) is not asked: a message to it would fail as an 'error' of
 * the child, which, unheard, ended this process before the folder was removed.
 */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.send('stop', () => {});
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Waits (up to 10 s) until no process holds `coverage` as its NODE_V8_COVERAGE: Node hands the variable
 * to every process it starts, so the spawner of gated's process runtime, a process of its own that
 * outlives gated by a few milliseconds, writes its counts into the folder as it exits. Removed before
 * that, the folder was made again by that write and left behind, now and then.
 */
async function writersGone(coverage: string): Promise<void> {
  const mark = Buffer.from(`NODE_V8_COVERAGE=${coverage}\0`);
  const writing = (): boolean =>
    readdirSync('/proc').some((pid) => {
      if (!/^\d+$/.test(pid)) return false;
      try {
        return readFileSync(`/proc/${pid}/environ`).includes(mark);
      } catch {
        return false; // gone meanwhile, or another user's
      }
    });
  const end = Date.now() + 10_000;
  while (existsSync('/proc/self/environ') && writing() && Date.now() < end)
    await new Promise((r) => setTimeout(r, 20));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { message, approval, messageCalls, approvalCalls } = await coverageWalk(
    !process.argv.includes('--no-build'),
  );
  const files = process.argv.includes('--files');
  process.stdout.write(`${report('one Telegram message', message, files)}\n${wakes(messageCalls)}\n`);
  process.stdout.write(`${report('one approval round trip', approval, files)}\n${wakes(approvalCalls)}\n`);
}
