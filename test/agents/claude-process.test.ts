/**
 * The Claude agent under the process runtime: sessions, tools, a long streamed turn and an overloaded API,
 * through the whole gateway against the local Messages API server.
 */
import { expect, test } from 'vitest';
import { longTurnScenario, overloadScenario, sessionScenario, useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();

test('first turn, follow-up with a tool call, resume in a new run, /new', { timeout: 120_000 }, async () => {
  const chat = await suite.start();
  await sessionScenario(chat, suite.api);
});

test('a turn streamed for 10 s reaches the chat intact', { timeout: 120_000 }, async () => {
  const chat = await suite.start();
  await longTurnScenario(chat, 10);
});

test('an overloaded API: retried runs, then one clear message', { timeout: 120_000 }, async () => {
  // No CLAUDE_CODE_MAX_RETRIES secret: the agent's own default (the CLI does not retry) is what runs.
  const chat = await suite.start({ env: { GATED_AGENT_SECRETS: 'ANTHROPIC_API_KEY,ANTHROPIC_BASE_URL' } });
  await overloadScenario(chat, suite.api);
  expect(suite.api.turns.length).toBeGreaterThanOrEqual(3);
});
