/**
 * The Claude agent leaves a run view worth reading: no SDK warning on its stderr (gated's action tools are
 * asked about through canUseTool, never pre-allowed, so nothing shadows the callback), and the run's
 * session_log row names the session the run started.
 */
import { expect, test } from 'vitest';
import { runsEnded, useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();

test(
  'a first run with action tools: a quiet stderr, its session id and usage on its row',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start({ actions: 'send,schedule,react' });
    const id = chat.send('hello there');
    expect(await chat.reply(id)).toBe('echo: hello there');
    await runsEnded(chat);
    const run = chat.gated.db
      .prepare(`SELECT session_id, stderr_tail, result, input_tokens, cost_usd FROM session_log`)
      .get() as Record<string, unknown>;
    // The action tools were offered: the model saw them.
    expect(suite.api.turns[0]!.body.tools!.map((t) => t.name)).toContain('mcp__gated__react');
    expect(run.result).toBe('ok');
    expect(run.stderr_tail).not.toMatch(/Warning|CLAUDE_SDK_/);
    const session = chat.gated.db.prepare(`SELECT session_id FROM sessions`).pluck().get();
    expect(session).toMatch(/^[0-9a-f-]{36}$/);
    expect(run.session_id).toBe(session);
    expect(run.input_tokens).toBeGreaterThan(0);
    expect(run.cost_usd).toBeGreaterThan(0);
  },
);
