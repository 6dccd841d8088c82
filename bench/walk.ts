/**
 * The coverage walk (docs/ARCHITECTURE.md, "The life of one Telegram message"): which of gated's functions
 * one Telegram message runs, and which one approval round trip runs, measured with V8's precise coverage
 * of the code compiled file by file (`dist/walk/`, by tsc first unless `--no-build`: the bundle `npm start`
 * runs would merge the files counted by). The compiled gated runs in a process of
 * its own (bench/walk-child.mjs, NODE_V8_COVERAGE set) against the local Bot API, the process runtime and
 * an agent that answers at once and asks when told to (test/queue/agents/ask-agent.mjs). The counts are
 * reset right before each walk and written right after it, so start-up is not counted; the poll interval
 * is a minute, so no timer of gated's runs inside a walk.
 *
 * 1. message: a private chat's "hello" → the agent's answer delivered to the chat.
 * 2. approval: a message whose agent asks about a `Bash` call (the group's rule: ask) → the question with
 *    its buttons in the chat → the owner's typed `/approve CODE` → the agent's answer delivered and the
 *    question edited to say who decided.
 *
 * Printed per walk: functions run and files touched under dist/walk/, then per folder and per file.
 *
 *   npx tsx bench/walk.ts [--no-build] [--files]
 */
import { execFileSync, fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
function walkOf(file: string, dist: string): Walk {
  const { result } = JSON.parse(readFileSync(file, 'utf8')) as { result: ScriptCoverage[] };
  const out: Walk = new Map();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(dist + sep)) continue;
    // A function's first range is the function itself: its count is how often it was called.
    const ran = script.functions.filter((f) => (f.ranges[0]?.count ?? 0) > 0 && f.ranges[0]!.startOffset > 0);
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

/** Runs both walks; returns them. */
export async function coverageWalk(build = true): Promise<{ message: Walk; approval: Walk }> {
  const dist = packageFile('dist', 'walk');
  if (build)
    execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', dist], {
      cwd: packageFile(),
      stdio: 'inherit',
    });
  const dir = mkdtempSync(join(tmpdir(), 'gated-walk-'));
  const coverage = join(dir, 'coverage');
  mkdirSync(coverage);
  const tg = await TelegramApiServer.start();
  tg.addChat(chat);
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? dir,
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_CONFIG_DIR: join(dir, 'config'),
    GATED_POLL_MS: '60000',
    GATED_ADMINS: String(ada.id),
    GATED_AGENT_CMD: `THINK_MS=0 exec node '${packageFile('test', 'queue', 'agents', 'ask-agent.mjs')}'`,
    GATED_IDLE_TIMEOUT_MS: '600000',
    GATED_HISTORY_DAYS: '0',
    TELEGRAM_BOT_TOKEN: tg.token,
    TELEGRAM_API_ROOT: tg.url,
    NODE_V8_COVERAGE: coverage,
  };
  const db = openDatabase(env.GATED_DB);
  addGroup(db, env.GATED_GROUPS_DIR, 'ops', 'Ops');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'ops')`).run();
  db.prepare(
    `INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('ops', 1, 'Bash', 'ask')`,
  ).run();
  db.close();
  const child = fork(packageFile('bench', 'walk-child.mjs'), [dist], { env, stdio: 'inherit' });
  const said: string[] = [];
  child.on('message', (m) => said.push(String(m)));
  const mark = async (): Promise<string> => {
    const n = said.filter((m) => m === 'marked').length;
    const before = new Set(readdirSync(coverage));
    child.send('mark');
    await until(() => said.filter((m) => m === 'marked').length > n, 10_000, 'the coverage mark');
    const file = readdirSync(coverage).find((f) => !before.has(f) && f.includes(`-${child.pid}-`));
    if (!file) throw new Error('no coverage file written');
    return join(coverage, file);
  };
  try {
    await until(() => said.includes('ready'), 60_000, 'gated to start');
    await tg.waitForPoll();
    // Settle: whatever the start left running (the first poll, the channel's first getUpdates) ends first.
    await new Promise((r) => setTimeout(r, 500));
    await mark();
    tg.message({ chat, from: ada, text: 'hello' });
    await until(() => tg.sent.find((m) => m.text.includes('did turn 1')), 30_000, 'the answer');
    await new Promise((r) => setTimeout(r, 200));
    const message = walkOf(await mark(), dist);

    const ask = { tool: 'Bash', input: { command: 'touch x' }, summary: 'a file' };
    tg.message({ chat, from: ada, text: `!ask ${JSON.stringify(ask)}` });
    const question = await until(
      () => tg.sent.find((m) => /\/approve [A-Z0-9]{5}/.test(m.text)),
      30_000,
      'the question',
    );
    const code = /\/approve ([A-Z0-9]{5})/.exec(question.text)![1]!;
    tg.message({ chat, from: ada, text: `/approve ${code}` });
    await until(() => tg.sent.find((m) => m.text.includes('tool Bash ran')), 30_000, 'the answer');
    await until(
      () => tg.edits.find((e) => e.message_id === question.message_id),
      30_000,
      'the question edited',
    );
    await new Promise((r) => setTimeout(r, 200));
    const approval = walkOf(await mark(), dist);
    return { message, approval };
  } finally {
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
    await tg.close();
    // The spawner writes its own coverage as it exits, after gated.
    for (let i = 0; i < 20; i++) {
      try {
        rmSync(dir, { recursive: true, force: true });
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { message, approval } = await coverageWalk(!process.argv.includes('--no-build'));
  const files = process.argv.includes('--files');
  process.stdout.write(`${report('one Telegram message', message, files)}\n`);
  process.stdout.write(`${report('one approval round trip', approval, files)}\n`);
}
