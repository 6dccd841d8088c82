/**
 * The Claude agent under the process runtime: sessions, tools, a long streamed turn and an overloaded API,
 * through the whole gateway against the local Messages API server.
 */
import { afterEach, beforeEach, expect, test } from 'vitest';
import { MessagesApiServer } from '../infra/messages-api.js';
import {
  longTurnScenario,
  overloadScenario,
  sessionScenario,
  startClaudeChat,
  type ClaudeChat,
} from './claude-support.js';

let api: MessagesApiServer;
let chat: ClaudeChat | undefined;

beforeEach(async () => {
  api = await MessagesApiServer.start();
});

afterEach(async () => {
  await chat?.gated.close(5000);
  chat = undefined;
  await api.close();
});

test('first turn, follow-up with a tool call, resume in a new run, /new', { timeout: 120_000 }, async () => {
  chat = await startClaudeChat(api);
  await sessionScenario(chat, api);
});

test('a turn streamed for 30 s reaches the chat intact', { timeout: 120_000 }, async () => {
  chat = await startClaudeChat(api);
  await longTurnScenario(chat, 30);
});

test('an overloaded API: retried runs, then one clear message', { timeout: 120_000 }, async () => {
  // No CLAUDE_CODE_MAX_RETRIES secret: the agent's own default (the CLI does not retry) is what runs.
  chat = await startClaudeChat(api, { env: { GATED_AGENT_SECRETS: 'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL' } });
  await overloadScenario(chat, api);
  expect(api.turns.length).toBeGreaterThanOrEqual(3);
});
