/**
 * A Codex turn cut off by kill -9 (issue 25 item 2, docs/AGENTS.md "The Codex agent"): the real `gated run`
 * with the Codex agent (process runtime) against the local Responses API. A turn calls gated's `schedule`
 * action and is killed, gated and the run's processes with -9, while the model streams its answer after
 * the tool's output. After the restart the thread goes on without the turn twice: the one request holds the
 * user's message once, the call and its output from before the crash once, and ends with the note to go
 * on; the tool is not called again, and the task the model recorded before the crash is created once.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { ResponsesApiServer, type ResponsesRequest } from '../infra/responses-api.js';
import { killRun, removeCodexHomes } from './crash-support.js';

let openai: ResponsesApiServer;
/** The group's folder of the test: the Codex home its killed run left in the temp folder is removed after. */
let groupDir: string | undefined;

beforeEach(async () => {
  openai = await ResponsesApiServer.start();
});

afterEach(async () => {
  await openai.close();
  // A test that failed before its end still leaves no home behind.
  if (groupDir) removeCodexHomes(groupDir);
  groupDir = undefined;
});

/** A request's input items as text, one each (messages, calls and outputs). */
function items(req: ResponsesRequest): Array<{ type: string; role: string; text: string }> {
  return req.body.input.map((i) => ({
    type: i.type ?? 'message',
    role: i.role ?? '',
    text: JSON.stringify(i.content ?? i.output ?? i),
  }));
}

test('a Codex turn cut off by kill -9 after its tool ran goes on once: its message once, the tool not again', async () => {
  const dir = tempDir('gated-codex-resume-');
  const env = gatedEnv(dir, {
    GATED_CODEX_CMD: `node '${packageFile('agents', 'codex', 'agent.mjs')}'`,
    GATED_IDLE_TIMEOUT_MS: '30000',
    GATED_RUN_TIMEOUT_MS: '120000',
    GATED_AGENT_SECRETS: 'OPENAI_API_KEY,OPENAI_BASE_URL',
    OPENAI_API_KEY: 'sk-openai-test-only',
    OPENAI_BASE_URL: openai.url,
    // A model the CLI does not know: it offers MCP tools as plain functions (namespaces), not code mode.
    GATED_CODEX_MODEL: 'gpt-codex-test-1',
  });
  const seed = openDatabase(env.GATED_DB);
  addGroup(seed, env.GATED_GROUPS_DIR, 'cx');
  seed.prepare(`UPDATE registered_groups SET agent = 'codex' WHERE folder = 'cx'`).run();
  const folder = join(env.GATED_GROUPS_DIR, 'cx');
  groupDir = folder;
  const send = (content: string) =>
    insertInbound(seed, { chat_jid: 'web:cx', sender: 'ada', sender_name: 'Ada', content })!;
  const watch = new Database(env.GATED_DB, { readonly: true });
  const replies = (id: number) =>
    watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
      .pluck()
      .all(id) as string[];

  const first = await gatedUp(gatedRun(env));
  const hello = send('hello before the crash');
  await until(() => replies(hello).length > 0, 60_000, 'the first answer');

  const asked = 'TOOL schedule {"every":"1h","text":"check the backups"} THEN SLOW 8';
  const cut = send(asked);
  const afterTool = await until(
    () => openai.requests.find((r) => r.body.input.at(-1)?.type === 'function_call_output'),
    60_000,
    "the tool's output reaching the model",
  );
  const at = Date.now();
  await until(() => Date.now() - at > 1000, 5000, 'a second of the streamed answer');
  expect(afterTool).toBeDefined();
  first.kill('SIGKILL');
  await exited(first);
  await killRun(folder, /agent\.mjs|codex|mcp-proxy/);
  expect(replies(cut)).toEqual([]);
  const before = openai.requests.length;

  const second = await gatedUp(gatedRun(env));
  await until(() => replies(cut).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  const resumed = openai.requests.slice(before);
  expect(resumed).toHaveLength(1);
  const input = items(resumed[0]!);
  expect(input.filter((i) => i.role === 'user' && i.text.includes('TOOL schedule'))).toHaveLength(1);
  expect(input.filter((i) => i.type === 'function_call')).toHaveLength(1);
  expect(input.filter((i) => i.type === 'function_call_output')).toHaveLength(1);
  expect(input.at(-1)!.text).toContain('Continue the turn');
  // The scripted model answers the newest user text: the note, once.
  expect(replies(cut)).toHaveLength(1);
  expect(replies(cut)[0]).toContain('Continue the turn');
  // The task the model recorded before the crash is applied once, with the turn's answer.
  expect(watch.prepare(`SELECT kind, spec, text FROM tasks`).all()).toEqual([
    { kind: 'every', spec: '1h', text: 'check the backups' },
  ]);
  // The run killed with -9 could not remove its Codex home; the next run's start did (and the one stopped
  // with SIGTERM removed its own): none is left.
  expect(removeCodexHomes(folder)).toBe(0);
  watch.close();
  seed.close();
}, 180_000);
