/**
 * The Claude agent (agents/claude) behind a whole gated, against the local Messages API server: what the
 * process-runtime and docker-runtime suites share. The chat is a web chat (`web:<group>` reaches the group
 * of that folder); the scripted model is steered by the words sent (test/infra/messages-api.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat } from 'telegraf/types';
import { afterEach, beforeEach, expect } from 'vitest';
import type { Config } from '../../core/config.js';
import type { Gated } from '../../gated/app.js';
import type { Runtime } from '../../queue/runtime/types.js';
import type { Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { closeTestGated, startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { MessagesApiServer, slowText } from '../infra/messages-api.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { groupDirOf } from '../../core/group-dir.js';

/** The fake key: it must reach the API and nothing else. */
export const API_KEY = 'sk-ant-test-NEVER-IN-ENV-0123456789';

/** A gated serving one web chat with the Claude agent. */
export interface ClaudeChat {
  gated: Gated;
  group: string;
  chat: string;
  groupDir: string;
  /** Sends `text` into the chat; returns the inbound row id. */
  send(text: string): number;
  /** Waits for the reply to row `id` and returns its text. */
  reply(id: number, ms?: number): Promise<string>;
  /** Runs (session_log rows) of the group, oldest first. */
  runs(): Array<{ id: number; result: string | null; error: string | null }>;
}

/** How startClaudeChat makes its gated. */
export interface ClaudeChatOptions {
  runtime?: (groupsDir: string) => Runtime;
  env?: Record<string, string>;
  /** registered_groups.network: the docker network the group's containers join. */
  network?: string;
  /** Platform channels from the configuration (env) instead of the web chat only; routes to the group. */
  routes?: string[];
  /** registered_groups.actions (the capabilities) and send_allow of the group. */
  actions?: string;
  sendAllow?: string;
  /** Groups below the chat's group (child names), served by the same agent. */
  children?: string[];
  /**
   * registered_groups.autonomy of the group. Default `full`: these suites test the agent, not the presets
   * (test/router/tool-rules.test.ts does), and their model writes files without a rule.
   */
  autonomy?: 'read_only' | 'supervised' | 'full';
  /** Serve the web chat over HTTP on a free port (gated.url); default off. */
  http?: boolean;
}

const GROUP = 'claude';

/** The settings of a gated on the Claude agent against the local Messages API at `apiUrl`. */
function claudeEnv(apiUrl: string): Record<string, string> {
  return {
    GATED_POLL_MS: '50',
    GATED_RUNTIME: 'process',
    GATED_AGENT_CMD: `node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`,
    // Long enough for a follow-up to reach the same run, short enough for the next run to start soon.
    GATED_IDLE_TIMEOUT_MS: '2500',
    GATED_RUN_TIMEOUT_MS: '120000',
    GATED_AGENT_SECRETS: 'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL,CLAUDE_CODE_MAX_RETRIES',
    ANTHROPIC_API_KEY: API_KEY,
    ANTHROPIC_BASE_URL: apiUrl,
    // One quick try per request: the gateway's own retry is what the tests look at.
    CLAUDE_CODE_MAX_RETRIES: '0',
  };
}

/** The Claude group (and its children), its routes and the settings of its row, stored before the start. */
function seedClaudeGroup(db: Db, groupsDir: string, opts: ClaudeChatOptions): void {
  addGroup(db, groupsDir, GROUP, 'Claude');
  for (const child of opts.children ?? []) addGroup(db, groupsDir, `${GROUP}/${child}`, child);
  for (const match of opts.routes ?? [])
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, ?, ?)`).run(match, GROUP);
  const set = (column: string, value: string) =>
    db.prepare(`UPDATE registered_groups SET ${column} = ? WHERE folder = ?`).run(value, GROUP);
  if (opts.actions !== undefined) set('actions', opts.actions);
  if (opts.sendAllow !== undefined) set('send_allow', opts.sendAllow);
  if (opts.network) set('network', opts.network);
  set('autonomy', opts.autonomy ?? 'full');
}

/**
 * Starts gated (test/helpers/gated.ts: closed after the test, runs get 5 s) with the Claude agent for
 * group `claude`, on `runtime` (or the process runtime).
 */
export async function startClaudeChat(
  api: MessagesApiServer,
  opts: ClaudeChatOptions = {},
): Promise<ClaudeChat> {
  const gated = await startTestGated({
    env: { ...claudeEnv(api.url), ...opts.env },
    graceMs: 5000,
    seed: (db, config) => seedClaudeGroup(db, config.groupsDir, opts),
    ...(opts.routes ? {} : { channels: [] }),
    http: opts.http === true,
    ...(opts.runtime ? { runtimeFor: (config: Config) => opts.runtime!(config.groupsDir) } : {}),
  });
  const chat = `web:${GROUP}`;
  return {
    gated,
    group: GROUP,
    chat,
    groupDir: groupDirOf(gated.config.groupsDir, GROUP),
    send: (text) => gated.gateway.sink({ chat_jid: chat, sender: 'ada', sender_name: 'Ada', content: text })!,
    reply: (id, ms = 60_000) =>
      until(
        () =>
          gated.db
            .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ? ORDER BY id`)
            .pluck()
            .get(id) as string | undefined,
        ms,
        `the reply to message ${id}`,
      ),
    runs: () =>
      gated.db
        .prepare(`SELECT id, result, error FROM session_log WHERE group_folder = ? ORDER BY id`)
        .all(GROUP) as Array<{ id: number; result: string | null; error: string | null }>,
  };
}

/** The local servers of a Claude suite, made before each test; `start` makes the test's gated. */
export interface ClaudeSuite {
  /** The local Messages API the agent talks to. */
  readonly api: MessagesApiServer;
  /** The local Bot API, with the suite's chats (only for a suite made with `telegram`). */
  readonly tg: TelegramApiServer;
  /** startClaudeChat against this suite's API; the gated is closed after the test, before the servers. */
  start(opts?: ClaudeChatOptions): Promise<ClaudeChat>;
  /**
   * start() serving the Telegram chats (TELEGRAM_* settings for the local Bot API, every Telegram chat
   * routed to the group) with `env` over them; resolves once gated polls the Bot API.
   */
  startTelegram(env?: Record<string, string>): Promise<ClaudeChat>;
}

/**
 * Registers the hooks of a Claude suite: before each test the local Messages API (and, with `telegram`,
 * the local Bot API knowing those chats); after it the test's gated is closed (its runs get 5 s), then
 * the servers.
 */
export function useClaudeSuite(opts: { telegram?: Chat[] } = {}): ClaudeSuite {
  let api: MessagesApiServer | undefined;
  let tg: TelegramApiServer | undefined;
  let gated: Gated | undefined;
  beforeEach(async () => {
    api = await MessagesApiServer.start();
    if (!opts.telegram) return;
    tg = await TelegramApiServer.start();
    for (const chat of opts.telegram) tg.addChat(chat);
  });
  afterEach(async () => {
    if (gated) await closeTestGated(gated, 5000);
    gated = undefined;
    await tg?.close();
    tg = undefined;
    await api?.close();
    api = undefined;
  });
  const suite: ClaudeSuite = {
    get api() {
      if (!api) throw new Error('the Messages API runs only during a test');
      return api;
    },
    get tg() {
      if (!tg) throw new Error('no Bot API: the suite was made without telegram chats');
      return tg;
    },
    async start(more = {}) {
      const c = await startClaudeChat(suite.api, more);
      gated = c.gated;
      return c;
    },
    async startTelegram(env = {}) {
      const bot = suite.tg;
      const c = await suite.start({
        routes: ['platform=telegram'],
        env: { TELEGRAM_BOT_TOKEN: bot.token, TELEGRAM_API_ROOT: bot.url, ...env },
      });
      await bot.waitForPoll();
      return c;
    },
  };
  return suite;
}

/** The newest conversation request whose newest user words contain `words`. */
export function requestFor(api: MessagesApiServer, words: string) {
  const req = [...api.turns].reverse().find((r) => api.seenUserWords(r).some((w) => w.includes(words)));
  expect(req, `a request carrying '${words}'`).toBeDefined();
  return req!;
}

/** Waits until every run of the chat has ended. */
export async function runsEnded(c: ClaudeChat, ms = 30_000): Promise<void> {
  await until(() => c.runs().every((r) => r.result !== null), ms, 'the runs to end');
}

/**
 * First turn, a follow-up in the same run with a tool call writing into the group's folder, a new run that
 * resumes the stored session (the model sees the earlier turns), then /new starting fresh.
 */
export async function sessionScenario(c: ClaudeChat, api: MessagesApiServer): Promise<void> {
  const first = c.send('hello from the first turn');
  expect(await c.reply(first)).toBe('echo: hello from the first turn');
  const session = c.gated.db
    .prepare(`SELECT session_id FROM sessions WHERE group_folder = ?`)
    .pluck()
    .get(c.group) as string;
  expect(session).toMatch(/^[0-9a-f-]{36}$/);

  // Still within the idle timeout: the same agent takes it as its next turn.
  const second = c.send('WRITE notes.txt tool-made');
  expect(await c.reply(second)).toContain('The file is written');
  expect(readFileSync(join(c.groupDir, 'notes.txt'), 'utf8')).toBe('tool-made');
  expect(c.runs()).toHaveLength(1);
  const followUp = requestFor(api, 'WRITE notes.txt');
  expect(api.seenUserWords(followUp).join('\n')).toContain('hello from the first turn');

  // The run ends on the idle timeout; the next message starts a new run resuming the stored session.
  await runsEnded(c);
  const third = c.send('do you remember me');
  expect(await c.reply(third)).toBe('echo: do you remember me');
  expect(c.runs()).toHaveLength(2);
  const resumed = requestFor(api, 'do you remember me');
  expect(api.seenUserWords(resumed).join('\n')).toContain('hello from the first turn');
  expect(c.gated.db.prepare(`SELECT session_id FROM sessions`).pluck().get()).toBe(session);

  // /new: the next run starts a session of its own.
  await runsEnded(c);
  c.send('/new');
  await until(() => c.gated.db.prepare(`SELECT COUNT(*) FROM sessions`).pluck().get() === 0);
  const fresh = c.send('a fresh start');
  expect(await c.reply(fresh)).toBe('echo: a fresh start');
  const freshReq = requestFor(api, 'a fresh start');
  expect(api.seenUserWords(freshReq).join('\n')).not.toContain('hello from the first turn');
  const newSession = await until(
    () => c.gated.db.prepare(`SELECT session_id FROM sessions`).pluck().get() as string | undefined,
  );
  expect(newSession).not.toBe(session);
  // The key went to the API, as the API expects it.
  expect(resumed.headers['x-api-key']).toBe(API_KEY);
}

/**
 * A turn streamed for `seconds` arrives whole, as one reply: 10 s are four idle timeouts (GATED_IDLE_TIMEOUT_MS
 * 2500) and 200 lines, a draft every 400 ms, for the run to be kept alive by and for the reply to lose none of.
 */
export async function longTurnScenario(c: ClaudeChat, seconds: number): Promise<void> {
  const id = c.send(`SLOW ${seconds}`);
  const text = await c.reply(id, (seconds + 60) * 1000);
  expect(text.trim()).toBe(slowText(seconds));
}

/**
 * The API answers 529: each run fails at once (no CLI retries), gated retries with its own backoff, then the
 * chat gets one message saying why, and the working indicator is off.
 */
export async function overloadScenario(c: ClaudeChat, api: MessagesApiServer): Promise<void> {
  const id = c.send('OVERLOAD please');
  const text = await c.reply(id, 150_000);
  expect(text).toMatch(
    /could not answer \(3 attempts, the last one failed: the Claude API is overloaded \(HTTP 529\)\)/,
  );
  // Three runs after two backoffs of about 1 s and 2 s, never the minutes of the CLI's own retries: those
  // would be more requests than the runs make (counted below, not timed: a loaded machine takes longer).
  const failed = c.runs().filter((r) => r.result === 'error');
  expect(failed.length).toBe(3);
  expect(failed.every((r) => /^exit code 75: the Claude API is overloaded/.test(r.error ?? ''))).toBe(true);
  const overloaded = api.requests.filter((r) => r.status === 529).length;
  expect(overloaded).toBeGreaterThanOrEqual(3);
  expect(overloaded).toBeLessThanOrEqual(6);
  expect(c.gated.web.isWorking(c.chat)).toBe(false);
  const replies = c.gated.db
    .prepare(`SELECT COUNT(*) FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
    .pluck()
    .get(id);
  expect(replies).toBe(1);
}
