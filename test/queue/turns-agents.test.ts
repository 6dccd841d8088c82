/**
 * Turns with real, slow agents (test/queue/agents/turn-agent.mjs under the process runtime, a real SQLite
 * file): what happens to the turns of a run when its agent or gated dies between them.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { packageFile } from '../../core/paths.js';
import { createQueue } from '../../queue/queue.js';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import type { WorkQueue } from '../../queue/types.js';
import type { Db } from '../../store/db.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { exited, spawnGated, until } from '../helpers/process.js';
import { ready } from './helpers.js';
import { recordingSignals } from '../helpers/signals.js';

/**
 * The machine's pid of the turn agent working in `dir`: it writes its pid as it sees it (inside the process
 * runtime's PID namespace, the namespace's), which the last number of an NSpid line names.
 */
function agentPid(dir: string): number {
  const inner = readFileSync(join(dir, 'agent.pid'), 'utf8').trim();
  const folder = realpathSync(dir);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ns = /^NSpid:\s+(.*)$/m
        .exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1]
        ?.trim()
        .split(/\s+/);
      if (ns?.at(-1) === inner && readlinkSync(`/proc/${entry}/cwd`) === folder) return Number(entry);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  throw new Error(`no process of pid ${inner} (as it sees it) works in ${dir}`);
}

const AGENT = packageFile('test', 'queue', 'agents', 'turn-agent.mjs');
const agentCmd = (env: Record<string, string | number>) =>
  `${Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')} exec node "${AGENT}"`;

const queues: WorkQueue[] = [];
const pids: number[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(2000);
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

interface AgentEvent {
  ev: 'line' | 'answer' | 'freeze' | 'eof' | 'exit';
  turn?: number;
  ids?: number[];
  roles?: string[];
  second?: boolean;
}

function agentLog(dir: string): AgentEvent[] {
  const file = join(dir, 'agent-log.jsonl');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AgentEvent);
}

/** A queue on a real process runtime running the turn agent in `groupsDir/g1`. */
function slowQueue(db: Db, env: Record<string, string | number>) {
  const groups = tempDir('gated-turns-');
  const dir = join(groups, 'g1');
  mkdirSync(dir);
  const { signals, partials: drafts } = recordingSignals();
  const config = loadConfig({ GATED_GROUPS_DIR: groups, GATED_IDLE_TIMEOUT_MS: '30000' });
  const queue = createQueue({
    db,
    runtime: createProcessRuntime({ cmd: agentCmd(env) }),
    config,
    log: silentLogger(),
    signals,
  });
  queues.push(queue);
  return { queue, dir, drafts };
}

const q = (db: Db, sql: string, ...args: unknown[]) =>
  db
    .prepare(sql)
    .pluck()
    .get(...args);
const rowOf = (db: Db, id: number) =>
  db.prepare('SELECT state, run_id, turn, attempts FROM messages WHERE id = ?').get(id) as {
    state: string;
    run_id: number;
    turn: number;
    attempts: number;
  };
const replies = (db: Db) =>
  db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply' ORDER BY id`)
    .pluck()
    .all() as string[];
/** How many reply lines echo each content. */
function echoCounts(db: Db): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of replies(db).join('\n').split('\n')) {
    if (line.startsWith('echo: ')) counts.set(line.slice(6), (counts.get(line.slice(6)) ?? 0) + 1);
  }
  return counts;
}

describe('turns with a slow agent that numbers its blocks', () => {
  it('an agent killed after answering turn 1 with turns 2–3 written: a new run answers 2–3, 1 stays answered', async () => {
    const { db } = freshDb();
    const { queue, dir, drafts } = slowQueue(db, { TURN_MS: 150, NUMBERED: 1, DRAFT: 1 });
    const m1 = ready(db, { chat: 'tg:A', content: 'one #hold=3 #freeze' });
    queue.wake();
    // The draft shows that this agent numbers its blocks: gated may write turns while turn 1 is open.
    await until(() => drafts.length > 0, 10_000, 'the draft of turn 1');
    const m2 = ready(db, { chat: 'tg:A', content: 'two' });
    queue.wake();
    await until(() => rowOf(db, m2).turn === 2, 10_000, 'turn 2 written');
    const m3 = ready(db, { chat: 'tg:A', content: 'three' });
    queue.wake();
    await until(() => rowOf(db, m1).state === 'done', 10_000, 'turn 1 answered');
    expect(rowOf(db, m3)).toMatchObject({ state: 'running', turn: 3 });
    expect(rowOf(db, m2).state).toBe('running');
    const firstRun = rowOf(db, m1).run_id;
    await until(() => agentLog(dir).some((e) => e.ev === 'freeze'), 10_000, 'the agent frozen');

    process.kill(agentPid(dir), 'SIGKILL');
    await until(() => rowOf(db, m2).state === 'done' && rowOf(db, m3).state === 'done', 15_000, 'turns 2–3');

    expect(Object.fromEntries(echoCounts(db))).toEqual({ 'one #hold=3 #freeze': 1, two: 1, three: 1 });
    expect(rowOf(db, m1).run_id).toBe(firstRun);
    const second = rowOf(db, m2);
    expect(second.run_id).not.toBe(firstRun);
    expect(rowOf(db, m3)).toMatchObject({ run_id: second.run_id, turn: 1, attempts: 0 });
    expect(second).toMatchObject({ turn: 1, attempts: 0 });
    expect(db.prepare('SELECT result, error FROM session_log WHERE id = ?').get(firstRun)).toEqual({
      result: 'error',
      error: 'killed by SIGKILL',
    });
    expect(drafts.every((d) => d.text.startsWith('draft of turn'))).toBe(true);
  }, 40_000);

  it('a follow-up that came before the first block is written once a block shows the agent numbers turns', async () => {
    const { db } = freshDb();
    // The draft, the agent's first block, 1.5 s after it read turn 1; turn 1 waits for a second line.
    const { queue, dir, drafts } = slowQueue(db, { TURN_MS: 150, NUMBERED: 1, DRAFT: 1, DRAFT_MS: 1500 });
    const m1 = ready(db, { chat: 'tg:A', content: 'one #hold=2' });
    queue.wake();
    await until(() => agentLog(dir).some((e) => e.ev === 'line' && e.turn === 1), 10_000, 'turn 1 read');
    const m2 = ready(db, { chat: 'tg:A', content: 'two' });
    queue.wake();
    // Not yet known to number its turns: the follow-up waits (an older agent would take it for turn 1's).
    expect(drafts).toEqual([]);
    await until(() => rowOf(db, m2).turn === 2, 10_000, 'turn 2 written once the draft came');
    await until(
      () => rowOf(db, m1).state === 'done' && rowOf(db, m2).state === 'done',
      10_000,
      'both answered',
    );
    expect(drafts[0]).toMatchObject({ turn: 1, text: 'draft of turn 1' });
    expect(rowOf(db, m2).run_id).toBe(rowOf(db, m1).run_id);
    expect(Object.fromEntries(echoCounts(db))).toEqual({ 'one #hold=2': 1, two: 1 });
  }, 30_000);

  it('stores drafts nowhere and both blocks of a turn once each', async () => {
    const { db } = freshDb();
    const { queue, dir, drafts } = slowQueue(db, { TURN_MS: 200, NUMBERED: 1, DRAFT: 1 });
    const m1 = ready(db, { chat: 'tg:A', content: 'a #two' });
    queue.wake();
    await until(() => agentLog(dir).some((e) => e.second), 10_000, 'the second block');
    const m2 = ready(db, { chat: 'tg:A', content: 'b' });
    queue.wake();
    await until(() => rowOf(db, m2).state === 'done', 10_000, 'turn 2 answered');

    expect(replies(db)).toEqual(['echo: a #two', 'more: a #two', 'echo: b']);
    expect(replies(db).some((r) => r.includes('draft'))).toBe(false);
    expect(drafts.map((d) => [d.turn, d.text])).toEqual([
      [1, 'draft of turn 1'],
      [2, 'draft of turn 2'],
    ]);
    expect(rowOf(db, m1)).toMatchObject({ state: 'done', turn: 1 });
    expect(rowOf(db, m2)).toMatchObject({ state: 'done', turn: 2, run_id: rowOf(db, m1).run_id });
    expect(q(db, 'SELECT replies FROM session_log')).toBe(3);
    // The second block of turn 1 answered nothing new; its reply still answers turn 1's row.
    expect(q(db, `SELECT count(DISTINCT reply_to_id) FROM messages WHERE is_from_me = 1`)).toBe(2);
  }, 30_000);
});

describe('turns with an agent that predates turn numbers', () => {
  it('never gets a second line before it answered the first; what arrived meanwhile goes in one line', async () => {
    const { db } = freshDb();
    const { queue, dir } = slowQueue(db, { TURN_MS: 800, NUMBERED: 0, DRAFT: 1 });
    const m1 = ready(db, { chat: 'tg:A', content: 'first' });
    queue.wake();
    await until(() => agentLog(dir).some((e) => e.ev === 'line'), 10_000, 'the first line read');
    const m2 = ready(db, { chat: 'tg:A', content: 'second' });
    const m3 = ready(db, { chat: 'tg:A', content: 'third' });
    queue.wake();
    // A bound for a loaded machine (the shell agent's two 800 ms turns took over 15 s once at load 20+).
    await until(() => rowOf(db, m3).state === 'done', 60_000, 'every message answered');

    const events = agentLog(dir).filter((e) => e.ev === 'line' || e.ev === 'answer');
    expect(events).toEqual([
      expect.objectContaining({ ev: 'line', turn: 1, ids: [m1], roles: ['member'] }),
      expect.objectContaining({ ev: 'answer', turn: 1 }),
      expect.objectContaining({ ev: 'line', turn: 2, ids: [m2, m3] }),
      expect.objectContaining({ ev: 'answer', turn: 2 }),
    ]);
    expect(Object.fromEntries(echoCounts(db))).toEqual({ first: 1, second: 1, third: 1 });
    expect([rowOf(db, m2).turn, rowOf(db, m3).turn]).toEqual([2, 2]);
  }, 90_000);
});

describe('turns across gated killed with -9', () => {
  it('answered turn 1 stays answered; turns 2–3 written before the kill are answered after restart', async () => {
    const dir = tempDir();
    const dbPath = join(dir, 'gated.db');
    const groupsDir = join(dir, 'groups');
    const env = {
      GATED_DB: dbPath,
      GATED_GROUPS_DIR: groupsDir,
      GATED_HTTP_PORT: '0',
      GATED_POLL_MS: '100',
      GATED_IDLE_TIMEOUT_MS: '30000',
      GATED_LOG_LEVEL: 'warn',
      GATED_AGENT_CMD: agentCmd({ TURN_MS: 150, NUMBERED: 1, DRAFT: 1 }),
    };
    const seed = openDatabase(dbPath);
    addGroup(seed, groupsDir, 'g1');
    const send = (content: string) => insertInbound(seed, { chat_jid: 'web:g1', sender: 'u', content })!;
    const watch = new Database(dbPath, { readonly: true });
    const row = (id: number) => rowOf(watch, id);
    const agentDir = join(groupsDir, 'g1');

    const first: ChildProcess = spawnGated(['run'], env);
    const m1 = send('one #hold=3 #freeze');
    await until(() => agentLog(agentDir).some((e) => e.ev === 'line'), 20_000, 'turn 1 read');
    await until(() => existsSync(join(agentDir, 'agent.pid')), 5000, 'the pid file');
    const frozen = agentPid(agentDir);
    pids.push(frozen);
    const m2 = send('two');
    await until(() => row(m2)?.turn === 2, 10_000, 'turn 2 written');
    const m3 = send('three');
    await until(() => row(m1).state === 'done', 10_000, 'turn 1 answered');
    expect(row(m3)).toMatchObject({ state: 'running', turn: 3 });
    const firstRun = row(m1).run_id;

    first.kill('SIGKILL');
    await exited(first);
    // The agents die with gated (as its process group would with the machine). The frozen agent may
    // already have ended by itself: its stdin closed with gated, and a pending promise keeps no process up.
    try {
      process.kill(frozen, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
    expect([row(m2).state, row(m3).state]).toEqual(['running', 'running']);

    const second = spawnGated(['run'], env);
    await until(() => row(m2).state === 'done' && row(m3).state === 'done', 30_000, 'turns 2–3 answered');
    second.kill('SIGTERM');
    expect(await exited(second)).toBe(0);

    expect(Object.fromEntries(echoCounts(watch))).toEqual({ 'one #hold=3 #freeze': 1, two: 1, three: 1 });
    expect(row(m1).run_id).toBe(firstRun);
    expect(row(m2).run_id).not.toBe(firstRun);
    expect(watch.prepare('SELECT error FROM session_log WHERE id = ?').pluck().get(firstRun)).toBe(
      'interrupted: gated restarted',
    );
    watch.close();
    seed.close();
  }, 90_000);
});
