/**
 * The Claude agent in its container (the image built offline from agents/claude by docker/build-offline.sh)
 * under the docker runtime on a real dockerd: sessions, tools, the API key kept out of the container's env,
 * a long streamed turn and an overloaded API.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { createDockerRuntime, INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { until } from '../helpers/process.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { MessagesApiServer } from '../infra/messages-api.js';
import {
  API_KEY,
  longTurnScenario,
  overloadScenario,
  sessionScenario,
  startClaudeChat,
  type ClaudeChat,
} from './claude-support.js';

const IMAGE = 'gated-claude:test';
const INSTANCE = `claude-test-${process.pid}`;

let engine: TestDockerd | undefined;
let api: MessagesApiServer;
let chat: ClaudeChat | undefined;

beforeAll(async () => {
  engine = await startDockerd();
  await engine.buildAgentImage(IMAGE, packageFile('agents', 'claude'));
}, 180_000);

afterAll(async () => {
  await engine?.stop();
});

beforeEach(async () => {
  api = await MessagesApiServer.start();
});

afterEach(async () => {
  await chat?.gated.close(5000);
  chat = undefined;
  await api.close();
  expect(
    await engine!.docker.listContainers({ all: true, filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] } }),
  ).toEqual([]);
});

/** Gated with the docker runtime; the agent reaches the loopback API through the host network. */
function start(): Promise<ClaudeChat> {
  return startClaudeChat(api, {
    network: true,
    runtime: (groupsDir) =>
      createDockerRuntime({
        docker: engine!.docker,
        image: IMAGE,
        instanceId: INSTANCE,
        groupsDir,
        networkMode: 'host',
      }),
  });
}

test('first turn, follow-up with a tool call, resume in a new run, /new', { timeout: 180_000 }, async () => {
  chat = await start();
  await sessionScenario(chat, api);
});

test(
  'a 30 s streamed turn arrives intact; the key is in no container env',
  { timeout: 180_000 },
  async () => {
    chat = await start();
    const turn = longTurnScenario(chat, 30);
    // While the turn streams, the container is up: look at what the engine and its first process hold.
    await until(() => api.turns.length > 0, 60_000, 'the agent to call the API');
    const [info] = await engine!.docker.listContainers({
      filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] },
    });
    expect(info).toBeDefined();
    const inspected = await engine!.docker.getContainer(info!.Id).inspect();
    expect(JSON.stringify(inspected)).not.toContain(API_KEY);
    const environ = readFileSync(`/proc/${inspected.State.Pid}/environ`, 'utf8');
    expect(environ).toContain('HOME=/tmp');
    expect(environ).not.toContain(API_KEY);
    expect(environ).not.toContain('ANTHROPIC');
    await turn;
    // The key did reach the API, from inside the container.
    expect(api.turns.at(-1)!.headers['x-api-key']).toBe(API_KEY);
  },
);

test('an overloaded API: retried runs, then one clear message', { timeout: 180_000 }, async () => {
  chat = await start();
  await overloadScenario(chat, api);
});
