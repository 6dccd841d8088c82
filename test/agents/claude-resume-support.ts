/**
 * What the interrupted-turn tests share (claude-resume-*.test.ts, one scenario per file so the three run at
 * once). A turn cut off by kill -9 (issue 25 item 2, docs/AGENTS.md "Interrupted turns"): the real `gated run` with
 * the Claude agent (process runtime) against the local Messages API. A turn runs a Bash command, a message
 * steered into it (steer mode) calls the group's MCP tool (test/agents/mcp-demo-server.mjs, which logs each
 * call), and the turn is killed, gated and the agent's processes with -9, while the model streams its
 * answer after the tool's result. After the restart the session is resumed without the turn twice: the
 * resumed request holds the user's message and the steered one once each, no "No response requested."
 * placeholder, the tools' results from before the crash, and the tool never ran again.
 */
import Database from 'better-sqlite3';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { openDatabase } from '../../store/db.js';
import { addGroup, setAutonomy } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { DEMO_TOKEN, writeGroupConfig } from '../helpers/group-config.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { MessagesApiServer, userWords, type RecordedRequest } from '../infra/messages-api.js';
import { API_KEY } from './claude-support.js';
import { killRun } from './crash-support.js';

/** The Claude agent as a process. */
export const AGENT = `node '${packageFile('agents', 'claude', 'agent.mjs')}'`;

/** The local Messages API of the running test (a fresh one per test: useResumeApi). */
export let api: MessagesApiServer;

/** Starts the local Messages API before each test of the file and closes it after. */
export function useResumeApi(): void {
  beforeEach(async () => {
    api = await MessagesApiServer.start();
  });
  afterEach(async () => {
    await api.close();
  });
}

/** The texts of a request's messages, each as one string (tool results and notes included). */
export function texts(req: RecordedRequest): string[] {
  return req.body.messages.map((m) =>
    typeof m.content === 'string' ? m.content : JSON.stringify(m.content),
  );
}

/** A gated (`gated run`, a child process) with the Claude agent for group `claude`, and its web chat. */
export function world(more: Record<string, string> = {}) {
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
     * Once the newest message the model was sent holds `said` (a tool's result, or the prompt) and its
     * answer has streamed for a second, kills gated with -9 and with it (as with the machine) every process
     * of the run. The answer's stream is held at its first line (MessagesApiServer.hold) until the kill, so
     * the kill lands in the middle of it however loaded the machine, and the answer can be short.
     */
    async cutAfter(gated: ChildProcess, said: string): Promise<void> {
      const release = api.hold();
      try {
        await killAfter(gated, said);
      } finally {
        release();
      }
    },
    close() {
      watch.close();
      seed.close();
    },
  };

  async function killAfter(gated: ChildProcess, said: string): Promise<void> {
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
  }
}

/**
 * The one conversation request after the restart: it holds the user's message `asked` once, the tool's
 * result before the crash (`said`) once, no placeholder, and ends with the note to go on.
 */
export function expectGoneOn(resumed: RecordedRequest[], asked: string, said: string): void {
  expect(resumed).toHaveLength(1);
  const sent = texts(resumed[0]!);
  expect(sent.filter((t) => t.includes(asked.slice(0, 12)))).toHaveLength(1);
  expect(api.seenUserWords(resumed[0]!).filter((w) => w === asked)).toHaveLength(1);
  expect(sent.filter((t) => t.includes(said))).toHaveLength(1);
  expect(sent.join('\n')).not.toContain('No response requested');
  expect(userWords(resumed[0]!.body.messages.at(-1)!.content)).toContain('Continue the turn');
}
