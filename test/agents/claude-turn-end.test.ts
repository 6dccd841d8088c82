/**
 * How the Claude agent's turn ends (docs/AGENTS.md). Steer mode (CONTRACT §19) with the real Claude CLI while the turn waits on something other than the
 * model: a Bash command that runs a few seconds, and a tool call waiting for a person's approval. A message
 * sent meanwhile is folded into the turn by the CLI; after the turn's result the CLI goes on saying things
 * (`command_lifecycle` frames, its session going idle) that must not hold the turn open: both messages are
 * answered once, within seconds, and the run then ends by its idle timeout. Before the fix the turn waited
 * for a second result that never came, until gated's hard timeout killed the run. A turn that makes no
 * progress at all ends with a named error after GATED_CLAUDE_STALL_MS.
 */
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { until } from '../helpers/process.js';
import { runsEnded, useClaudeSuite } from './claude-support.js';
import {
  RUN_TIMEOUT_MS,
  steerWhileApprovalScenario,
  steerWhileBashScenario,
} from './claude-steer-support.js';

const suite = useClaudeSuite();

const AGENT = `node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`;
/** The agent with shell commands allowed (the process runtime does not allow them by default). */
const SHELL_AGENT = `GATED_CLAUDE_SHELL=1 IS_SANDBOX=1 ${AGENT}`;

test(
  'steer mode: a follow-up while a Bash command runs is answered once, within seconds',
  { timeout: 90_000 },
  async () => {
    const env = { GATED_AGENT_CMD: SHELL_AGENT, GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS };
    await steerWhileBashScenario(await suite.start({ env }), suite.api);
  },
);

test(
  'steer mode: a follow-up while a tool call waits for approval is answered once, within seconds',
  { timeout: 90_000 },
  async () => {
    const env = { GATED_AGENT_CMD: SHELL_AGENT, GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS };
    await steerWhileApprovalScenario(await suite.start({ env }), suite.api);
  },
);

test(
  'a turn with no progress (the API stalls mid-answer) ends with a named error within seconds, not the hard timeout',
  { timeout: 90_000 },
  async () => {
    const chat = await suite.start({
      env: {
        GATED_AGENT_CMD: `GATED_CLAUDE_STALL_MS=3000 ${AGENT}`,
        GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS,
      },
    });
    const id = chat.send('STALL now');
    const answer = await chat.reply(id, 30_000);
    expect(answer).toBe(
      'The agent could not answer: the Claude Code session made no progress for 3 s (GATED_CLAUDE_STALL_MS)',
    );
    await runsEnded(chat, 20_000);
    const [run] = chat.runs();
    expect(run!.result).toBe('error');
    expect(run!.error).toMatch(/^exit code 1/);
    // The stalled request was given up by the agent's CLI, which it closed.
    await until(() => suite.api.turns[0]!.cutMs, 10_000, 'the stalled stream to be closed');
  },
);
