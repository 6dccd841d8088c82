/**
 * The Codex agent in its container on the docker runtime (issue 41): the image built offline from
 * agents/codex (docker/build-offline.sh, with this machine's sh and bash for the CLI's wrapper and shell
 * commands) on a private dockerd, against the local Responses API on the host network. A shell command
 * under an `ask` rule runs only once approved in the chat, through the CLI's hook in the container; in steer
 * mode a follow-up sent while that approval waits, and one sent while a command runs, are answered once
 * each (the Codex CLI takes no message inside a turn: it is the next turn) and the run ends by its idle
 * timeout; `/interrupt` cuts a streamed turn and the new message is answered as the next turn. The agent
 * runs with GATED_CODEX_IN_CONTAINER=1, as its production image: the CLI's own sandbox (bubblewrap) cannot
 * start in a container. The process runtime's suite: codex-tools.test.ts.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { groupDirOf } from '../../core/group-dir.js';
import { packageFile } from '../../core/paths.js';
import type { Gated } from '../../gated/app.js';
import { createDockerRuntime, INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { upsertMember } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { closeTestGated, startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { ENGINE_START_MS } from '../helpers/runtimes.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { ResponsesApiServer } from '../infra/responses-api.js';

const IMAGE = 'gated-codex:test';
const GROUP = 'cx';
const CHAT = `web:${GROUP}`;
const instance = `codex-docker-test-${process.pid}`;

let engine: TestDockerd;
let openai: ResponsesApiServer;
let gated: Gated | undefined;

beforeAll(async () => {
  engine = await startDockerd();
  // sh for the wrapper that starts the CLI with hooks (agents/codex/codex-cli.sh), bash and the programs
  // the model's commands run.
  await engine.buildAgentImage(
    IMAGE,
    packageFile('agents', 'codex'),
    undefined,
    ['sh', 'bash', 'sleep', 'touch'],
    // As the production image: the container is the sandbox.
    ['GATED_CODEX_IN_CONTAINER=1'],
  );
}, ENGINE_START_MS);

afterAll(async () => {
  await engine?.stop();
}, 60_000);

beforeEach(async () => {
  openai = await ResponsesApiServer.start();
});

afterEach(async () => {
  if (gated) await closeTestGated(gated, 5000);
  gated = undefined;
  await openai.close();
  const left = await engine.docker.listContainers({
    all: true,
    filters: { label: [`${INSTANCE_LABEL}=${instance}`] },
  });
  expect(left).toEqual([]);
});

/** A gated whose group `cx` runs the Codex agent in its container; `steer` sets its busy mode to steer. */
async function startCodex(opts: { steer?: boolean; askBash?: boolean } = {}) {
  const g = (gated = await startTestGated({
    env: {
      GATED_POLL_MS: '50',
      GATED_IDLE_TIMEOUT_MS: '2500',
      GATED_RUN_TIMEOUT_MS: '300000',
      GATED_AGENT_SECRETS: 'OPENAI_API_KEY,OPENAI_BASE_URL',
      OPENAI_API_KEY: 'sk-openai-test-only',
      OPENAI_BASE_URL: openai.url,
      GATED_CODEX_MODEL: 'gpt-codex-test-1',
      GATED_CODEX_IMAGE: IMAGE,
    },
    graceMs: 5000,
    channels: [],
    http: false,
    runtimeFor: (config) =>
      createDockerRuntime({
        docker: engine.docker,
        image: IMAGE,
        instanceId: instance,
        groupsDir: config.groupsDir,
      }),
    seed: (db, config) => {
      addGroup(db, config.groupsDir, GROUP, 'Codex');
      const set = (column: string, value: string) =>
        db.prepare(`UPDATE registered_groups SET ${column} = ? WHERE folder = ?`).run(value, GROUP);
      set('agent', 'codex');
      set('autonomy', 'full');
      set('actions', '');
      // The container reaches the local API on the host's loopback.
      set('network', 'host');
      if (opts.steer) set('busy', 'steer');
      if (!opts.askBash) return;
      upsertMember(db, GROUP, 'web:ada', 'owner');
      db.prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES (?, 1, 'Bash', '*', 'ask')`,
      ).run(GROUP);
    },
  }));
  const replies = (id: number) =>
    g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ? ORDER BY id`)
      .pluck()
      .all(id) as string[];
  return {
    g,
    groupDir: groupDirOf(g.config.groupsDir, GROUP),
    send: (text: string) =>
      g.gateway.sink({ chat_jid: CHAT, sender: 'ada', sender_name: 'Ada', content: text })!,
    replies,
    reply: (id: number, ms = 60_000) => until(() => replies(id)[0], ms, `the reply to message ${id}`),
    runs: () =>
      g.db
        .prepare(`SELECT result, error FROM session_log WHERE group_folder = ? ORDER BY id`)
        .all(GROUP) as Array<{ result: string | null; error: string | null }>,
  };
}

type Codex = Awaited<ReturnType<typeof startCodex>>;

/** Waits for every run to end and checks there was one, ended by its idle timeout (result ok). */
async function oneRunEndedOk(c: Codex): Promise<void> {
  await until(() => c.runs().every((r) => r.result !== null), 30_000, 'the run to end');
  expect(c.runs()).toEqual([{ result: 'ok', error: null }]);
}

test(
  'docker: a shell command under an ask rule runs once approved; a follow-up steered in while it waits is answered once',
  { timeout: 180_000 },
  async () => {
    const c = await startCodex({ steer: true, askBash: true });
    const asked = c.send('TOOL exec_command {"cmd":"touch approved.txt"}');
    const question = await until(
      () =>
        c.g.db
          .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%/approve %'`)
          .pluck()
          .get() as string | undefined,
      60_000,
      'the approval question',
    );
    expect(question).toContain('touch approved.txt');
    const also = c.send('and also this');
    await until(
      () => c.g.db.prepare(`SELECT turn FROM messages WHERE id = ?`).pluck().get(also) !== null,
      10_000,
      'the follow-up handed to the agent',
    );
    // Nothing ran while the question waits.
    expect(existsSync(join(c.groupDir, 'approved.txt'))).toBe(false);
    c.send(`/approve ${/\/approve ([A-Z0-9]{5})/.exec(question)![1]!}`);
    expect(await c.reply(asked)).toContain('Process exited with code 0');
    expect(existsSync(join(c.groupDir, 'approved.txt'))).toBe(true);
    expect(await c.reply(also, 20_000)).toBe('codex echo: and also this');
    await oneRunEndedOk(c);
    expect(c.replies(asked)).toHaveLength(1);
    expect(c.replies(also)).toHaveLength(1);
    expect(c.g.db.prepare(`SELECT tool, input_line, state FROM tool_approvals`).all()).toEqual([
      { tool: 'Bash', input_line: 'touch approved.txt', state: 'approved' },
    ]);
  },
);

test(
  'docker: steer mode, a follow-up while a shell command runs is answered once after it',
  { timeout: 180_000 },
  async () => {
    const c = await startCodex({ steer: true });
    const first = c.send('TOOL exec_command {"cmd":"touch started; sleep 3; touch slept"}');
    await until(() => existsSync(join(c.groupDir, 'started')), 60_000, 'the command to start');
    const also = c.send('and also this');
    expect(await c.reply(first, 30_000)).toContain('Process exited with code 0');
    expect(existsSync(join(c.groupDir, 'slept'))).toBe(true);
    expect(await c.reply(also, 20_000)).toBe('codex echo: and also this');
    await oneRunEndedOk(c);
    expect(c.replies(first)).toHaveLength(1);
    expect(c.replies(also)).toHaveLength(1);
  },
);

test(
  'docker: /interrupt mid-stream cuts the turn and the new message is answered as the next turn',
  { timeout: 180_000 },
  async () => {
    const c = await startCodex();
    const long = c.send('SLOW 40');
    const req = await until(
      () => openai.requestFor('SLOW 40'),
      60_000,
      "the model's request for the long turn",
    );
    // The turn is numbered by now (the agent read its line); the stream goes on for 40 s.
    await new Promise((r) => setTimeout(r, 1000));
    const sentAt = Date.now();
    const better = c.send('/interrupt better idea');
    // Cut, not ended: cutMs is recorded only for a stream closed before its 40 s were sent.
    const cutAt = await until(() => req.cutMs, 30_000, 'the stream to be cut');
    expect(cutAt).toBeGreaterThanOrEqual(sentAt);
    expect(await c.reply(better)).toBe('codex echo: better idea');
    await oneRunEndedOk(c);
    // The CLI reports a message only once it is whole: the cut turn had said nothing, so it is answered
    // without a reply of its own (done, its turn the first), and the new message was the next turn.
    expect(c.replies(long)).toEqual([]);
    expect(c.replies(better)).toHaveLength(1);
    const states = c.g.db
      .prepare(`SELECT state, turn FROM messages WHERE id IN (?, ?) ORDER BY id`)
      .all(long, better);
    expect(states).toEqual([
      { state: 'done', turn: 1 },
      { state: 'done', turn: 2 },
    ]);
  },
);
