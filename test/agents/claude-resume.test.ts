/**
 * A turn cut off by kill -9 (issue 25 item 2, docs/AGENTS.md "Interrupted turns"): the real `gated run` with
 * the Claude agent (process runtime) against the local Messages API. A turn runs a Bash command, a message
 * steered into it (steer mode) calls the group's MCP tool (test/agents/mcp-demo-server.mjs, which logs each
 * call), and the turn is killed, gated and the agent's processes with -9, while the model streams its
 * answer after the tool's result. After the restart the session is resumed without the turn twice: the
 * resumed request holds the user's message and the steered one once each, no "No response requested."
 * placeholder, the tools' results from before the crash, and the tool never ran again.
 */
import Database from 'better-sqlite3';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { openDatabase } from '../../store/db.js';
import { addGroup, setAutonomy } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { DEMO_TOKEN, writeGroupConfig } from '../helpers/group-config.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { MessagesApiServer, slowText, userWords, type RecordedRequest } from '../infra/messages-api.js';
import { API_KEY } from './claude-support.js';
import { killRun } from './crash-support.js';

const AGENT = `node '${packageFile('agents', 'claude', 'agent.mjs')}'`;

let api: MessagesApiServer;

beforeEach(async () => {
  api = await MessagesApiServer.start();
});

afterEach(async () => {
  await api.close();
});

/** The texts of a request's messages, each as one string (tool results and notes included). */
function texts(req: RecordedRequest): string[] {
  return req.body.messages.map((m) =>
    typeof m.content === 'string' ? m.content : JSON.stringify(m.content),
  );
}

/** A gated (`gated run`, a child process) with the Claude agent for group `claude`, and its web chat. */
function world(more: Record<string, string> = {}) {
  const dir = tempDir('gated-resume-');
  const configDir = tempDir('gated-resume-config-');
  writeGroupConfig(configDir, 'claude');
  const env = gatedEnv(dir, {
    GATED_AGENT_CMD: AGENT,
    GATED_CONFIG_DIR: configDir,
    GATED_IDLE_TIMEOUT_MS: '30000',
    GATED_RUN_TIMEOUT_MS: '120000',
    GATED_AGENT_SECRETS:
      'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL,CLAUDE_CODE_MAX_RETRIES,claude:DEMO_TOKEN=CLAUDE_DEMO_TOKEN',
    ANTHROPIC_API_KEY: API_KEY,
    ANTHROPIC_BASE_URL: api.url,
    CLAUDE_CODE_MAX_RETRIES: '0',
    CLAUDE_DEMO_TOKEN: DEMO_TOKEN,
    ...more,
  });
  const seed = openDatabase(env.GATED_DB);
  addGroup(seed, env.GATED_GROUPS_DIR, 'claude');
  // The model's tools run without a question: this suite tests resuming, not the presets.
  setAutonomy(seed, 'claude', 'full');
  const watch = new Database(env.GATED_DB, { readonly: true });
  const groupDir = join(env.GATED_GROUPS_DIR, 'claude');
  return {
    groupDir,
    watch,
    start: () => gatedUp(gatedRun(env)),
    steer: () => seed.prepare(`UPDATE registered_groups SET busy = 'steer' WHERE folder = 'claude'`).run(),
    send: (content: string) =>
      insertInbound(seed, { chat_jid: 'web:claude', sender: 'ada', sender_name: 'Ada', content })!,
    replies: (id: number) =>
      watch
        .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
        .pluck()
        .all(id) as string[],
    sessions: () => watch.prepare(`SELECT session_id FROM sessions`).pluck().all() as string[],
    /**
     * Once the newest message the model was sent holds `said` (a tool's result, or the prompt) and a
     * second of its answer streamed, kills gated with -9 and with it (as with the machine) every process
     * of the run.
     */
    async cutAfter(gated: ChildProcess, said: string): Promise<void> {
      const afterTool = await until(
        // The newest message of the conversation: the CLI puts a hook's context (a tool call's receipt) after
        // it as a system message.
        () =>
          api.turns.find((r) =>
            JSON.stringify(r.body.messages.filter((m) => m.role !== 'system').at(-1)).includes(said),
          ),
        60_000,
        "the tool's result reaching the model",
      );
      await until(() => Date.now() - afterTool.atMs > 1000, 5000, 'a second of the streamed answer');
      gated.kill('SIGKILL');
      await exited(gated);
      await killRun(groupDir, /agent\.mjs|claude|mcp-demo-server/);
    },
    close() {
      watch.close();
      seed.close();
    },
  };
}

/**
 * The one conversation request after the restart: it holds the user's message `asked` once, the tool's
 * result before the crash (`said`) once, no placeholder, and ends with the note to go on.
 */
function expectGoneOn(resumed: RecordedRequest[], asked: string, said: string): void {
  expect(resumed).toHaveLength(1);
  const sent = texts(resumed[0]!);
  expect(sent.filter((t) => t.includes(asked.slice(0, 12)))).toHaveLength(1);
  expect(api.seenUserWords(resumed[0]!).filter((w) => w === asked)).toHaveLength(1);
  expect(sent.filter((t) => t.includes(said))).toHaveLength(1);
  expect(sent.join('\n')).not.toContain('No response requested');
  expect(userWords(resumed[0]!.body.messages.at(-1)!.content)).toContain('Continue the turn');
}

test('a turn cut off by kill -9 after its tools ran, with a message steered into it, goes on once: each message once, no placeholder, no tool again', async () => {
  // Steer mode: the follow-up is folded into the turn while its Bash command runs (the CLI keeps it in the
  // transcript as a queued_command attachment), and asks for the MCP tool; the turn is cut while the model
  // streams after that tool's result.
  const w = world({ GATED_AGENT_CMD: `GATED_CLAUDE_SHELL=1 IS_SANDBOX=1 ${AGENT}` });
  const lookups = () => readFileSync(join(w.groupDir, 'demo-lookups.log'), 'utf8');
  w.steer();
  const first = await w.start();
  const hello = w.send('hello before the crash');
  await until(() => w.replies(hello).length > 0, 60_000, 'the first answer');
  const [session] = w.sessions();

  const asked = 'BASH touch started; sleep 3; echo slept THEN SLOW 8';
  const cut = w.send(asked);
  await until(() => existsSync(join(w.groupDir, 'started')), 30_000, 'the command to start');
  const steered = 'and also this TOOL lookup {"query":"anchor"}';
  const also = w.send(steered);
  await w.cutAfter(first, 'definition of anchor');
  expect(lookups()).toBe('anchor\n');
  expect(w.replies(cut)).toEqual([]);
  expect(w.replies(also)).toEqual([]);
  const before = api.turns.length;

  const second = await w.start();
  await until(() => w.replies(also).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  expectGoneOn(api.turns.slice(before), asked, 'definition of anchor (token ok)');
  // The steered message once in the model's context (twice before: kept in the transcript and sent again).
  const context = JSON.stringify(api.turns.at(-1)!.body.messages);
  expect(context.split('and also this').length - 1).toBe(1);
  // The MCP tool ran once in all (and no request after the restart called any tool); the answer is the one streamed after the MCP tool's result, stored once.
  expect(lookups()).toBe('anchor\n');
  expect(w.replies(also)).toEqual([slowText(8)]);
  expect(w.replies(cut)).toEqual([]);
  expect(w.sessions()).toEqual([session]);
  w.close();
}, 180_000);

test("a session's first turn cut off after an action: found through the agent's ledger, the action applied once", async () => {
  const w = world();
  const first = await w.start();
  const asked = 'TOOL schedule {"every":"1h","text":"check the backups"} THEN SLOW 6';
  const cut = w.send(asked);
  await w.cutAfter(first, 'Recorded: a task');
  // gated never learned the session: no answer of it was stored.
  expect(w.sessions()).toEqual([]);
  const projects = join(w.groupDir, '.claude-agent', 'projects');
  const transcripts = () =>
    readdirSync(projects).flatMap((d) => readdirSync(join(projects, d)).filter((f) => f.endsWith('.jsonl')));
  const [transcript] = transcripts();
  const before = api.turns.length;

  const second = await w.start();
  await until(() => w.replies(cut).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  expectGoneOn(api.turns.slice(before), asked, 'Recorded: a task (1h)');
  expect(w.replies(cut)).toEqual([slowText(6)]);
  // The same session went on, and the task the model recorded before the crash was applied once.
  expect(transcripts()).toEqual([transcript]);
  expect(w.sessions()).toEqual([transcript!.replace(/\.jsonl$/, '')]);
  expect(w.watch.prepare(`SELECT kind, spec, text FROM tasks`).all()).toEqual([
    { kind: 'every', spec: '1h', text: 'check the backups' },
  ]);
  w.close();
}, 180_000);

test('a turn cut off by kill -9 before any tool result is sent again once, without a placeholder', async () => {
  const w = world();
  const first = await w.start();
  const hello = w.send('hello before the crash');
  await until(() => w.replies(hello).length > 0, 60_000, 'the first answer');
  const [session] = w.sessions();

  const asked = 'SLOW 8';
  const cut = w.send(asked);
  await w.cutAfter(first, asked);
  const before = api.turns.length;

  const second = await w.start();
  await until(() => w.replies(cut).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  // The session went back to before the cut-off prompt, which came once: earlier turns kept.
  const resumed = api.turns.slice(before);
  expect(resumed).toHaveLength(1);
  const words = api.seenUserWords(resumed[0]!);
  expect(words).toEqual(['hello before the crash', asked]);
  expect(texts(resumed[0]!).join('\n')).not.toContain('No response requested');
  expect(texts(resumed[0]!).join('\n')).not.toContain('Continue the turn');
  expect(w.replies(cut)).toEqual([slowText(8)]);
  expect(w.sessions()).toEqual([session]);
  w.close();
}, 180_000);
