/**
 * How the Claude agent's turn ends (docs/AGENTS.md). Steer mode (CONTRACT §19) with the real Claude CLI while the turn waits on something other than the
 * model: a Bash command that runs a few seconds, and a tool call waiting for a person's approval. A message
 * sent meanwhile is folded into the turn by the CLI; after the turn's result the CLI goes on saying things
 * (`command_lifecycle` frames, its session going idle) that must not hold the turn open: both messages are
 * answered once, within seconds, and the run then ends by its idle timeout. Before the fix the turn waited
 * for a second result that never came, until gated's hard timeout killed the run. A turn that makes no
 * progress at all ends with a named error after GATED_CLAUDE_STALL_MS. `/interrupt` while a call waits for its
 * approval reaches the turn: the agent's ask block names the turn (gated can interrupt a turn only once a
 * block of it said its number), the question is cancelled and the command never runs.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { until } from '../helpers/process.js';
import { requestFor, runsEnded, useClaudeSuite } from './claude-support.js';
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
    // A first turn boots the CLI: the silence counted is then the stalled request's, not the CLI's own
    // start, which on a loaded machine can take longer than the 3 s by itself.
    expect(await chat.reply(chat.send('hello'), 30_000)).toBe('echo: hello');
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
    const stalledTurn = requestFor(suite.api, 'STALL now');
    await until(() => stalledTurn.cutMs, 10_000, 'the stalled stream to be closed');
  },
);

test(
  '/interrupt while the turn waits on an approval: the ask names its turn, the turn is interrupted, the call never runs',
  { timeout: 90_000 },
  async () => {
    // What the agent prints is kept beside it (blocks.log in its folder), to read its ask block.
    const chat = await suite.start({
      env: { GATED_AGENT_CMD: `${SHELL_AGENT} | tee blocks.log`, GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS },
    });
    const db = chat.gated.db;
    upsertMember(db, chat.group, 'web:ada', 'owner');
    db.prepare(
      `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES (?, 1, 'Bash', '*', 'ask')`,
    ).run(chat.group);
    const asked = chat.send('BASH echo ran | tee ran.txt');
    await until(
      () => db.prepare(`SELECT 1 FROM tool_approvals WHERE state = 'pending'`).get(),
      30_000,
      'the approval question',
    );
    // The ask block names its turn: gated may interrupt the turn even when the ask is its first block.
    // tee writes each chunk to its stdout (gated) before the file, so gated can have the ask, and its
    // pending row, before blocks.log has the line: wait for the line, then read what it says.
    const asks = () =>
      readFileSync(join(chat.groupDir, 'blocks.log'), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { ask?: unknown; turn?: number })
        .filter((b) => b.ask);
    const logged = await until(
      () => (asks().length > 0 ? asks() : undefined),
      10_000,
      'the ask in blocks.log',
    );
    expect(logged.map((b) => b.turn)).toEqual([1]);
    const stop = chat.send('/interrupt');
    expect(await chat.reply(stop)).toBe('interrupting claude');
    // The ask is cancelled, its turn answered as interrupted (done), and the command never ran.
    await until(
      () => db.prepare(`SELECT state FROM messages WHERE id = ?`).pluck().get(asked) === 'done',
      20_000,
      'the interrupted turn answered',
    );
    expect(db.prepare(`SELECT state FROM tool_approvals`).pluck().all()).toEqual(['cancelled']);
    const after = chat.send('still there');
    expect(await chat.reply(after, 30_000)).toBe('echo: still there');
    expect(existsSync(join(chat.groupDir, 'ran.txt'))).toBe(false);
    expect(chat.runs()).toHaveLength(1);
  },
);
