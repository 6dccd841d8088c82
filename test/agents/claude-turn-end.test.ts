/**
 * How the Claude agent's turn ends (docs/AGENTS.md). Steer mode (CONTRACT §19) with the real Claude CLI while the turn waits on something other than the
 * model: a Bash command that runs a few seconds, and a tool call waiting for a person's approval. A message
 * sent meanwhile is folded into the turn by the CLI; after the turn's result the CLI goes on saying things
 * (`command_lifecycle` frames, its session going idle) that must not hold the turn open: both messages are
 * answered once, within seconds, and the run then ends by its idle timeout. Before the fix the turn waited
 * for a second result that never came, until gated's hard timeout killed the run. A turn that makes no
 * progress at all ends with a named error after GATED_CLAUDE_STALL_MS.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { until } from '../helpers/process.js';
import { runsEnded, useClaudeSuite, type ClaudeChat } from './claude-support.js';

const suite = useClaudeSuite();

const AGENT = `node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`;
/** The agent with shell commands allowed (the process runtime does not allow them by default). */
const SHELL_AGENT = `GATED_CLAUDE_SHELL=1 IS_SANDBOX=1 ${AGENT}`;
/** Far beyond what the test waits: a turn held open would show as a missing reply, not as a killed run. */
const RUN_TIMEOUT_MS = '300000';

/** The replies stored for inbound row `id`. */
function repliesTo(c: ClaudeChat, id: number): string[] {
  return c.gated.db
    .prepare(
      `SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ? AND kind = 'reply' ORDER BY id`,
    )
    .pluck()
    .all(id) as string[];
}

async function steerChat(): Promise<ClaudeChat> {
  const chat = await suite.start({
    env: { GATED_AGENT_CMD: SHELL_AGENT, GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS },
  });
  chat.gated.db.prepare(`UPDATE registered_groups SET busy = 'steer' WHERE folder = ?`).run(chat.group);
  return chat;
}

/**
 * The two messages were answered by one reply (to the newest), the model saw the follow-up inside the
 * turn, and the run ended by its idle timeout (result ok), not killed.
 */
async function answeredOnce(chat: ClaudeChat, first: number, also: number, tool: string): Promise<void> {
  const answer = await chat.reply(also, 20_000);
  expect(answer).toContain(tool);
  expect(answer).toContain('echo: and also this');
  await runsEnded(chat, 20_000);
  expect(repliesTo(chat, also)).toEqual([answer]);
  expect(repliesTo(chat, first)).toEqual([]);
  const runs = chat.runs();
  expect(runs).toEqual([{ id: runs[0]!.id, result: 'ok', error: null }]);
  const states = chat.gated.db
    .prepare(`SELECT state FROM messages WHERE id IN (?, ?)`)
    .pluck()
    .all(first, also);
  expect(states).toEqual(['done', 'done']);
  // The model read the follow-up beside the tool's result, inside the turn: never as a turn of its own.
  const folded = suite.api.turns.filter((r) => JSON.stringify(r.body.messages).includes('and also this'));
  expect(folded.length).toBeGreaterThan(0);
  expect(JSON.stringify(folded[0]!.body.messages)).toContain('tool_result');
  expect(folded.some((r) => suite.api.seenUserWords(r).some((w) => w.includes('and also this')))).toBe(false);
}

test(
  'steer mode: a follow-up while a Bash command runs is answered once, within seconds',
  { timeout: 90_000 },
  async () => {
    const chat = await steerChat();
    const first = chat.send('BASH touch started; sleep 4; echo slept');
    // The command runs (and its result has not come back).
    await until(() => existsSync(join(chat.groupDir, 'started')), 30_000, 'the command to start');
    const also = chat.send('and also this');
    await answeredOnce(chat, first, also, 'Tool Bash said: slept');
  },
);

test(
  'steer mode: a follow-up while a tool call waits for approval is answered once, within seconds',
  { timeout: 90_000 },
  async () => {
    const chat = await steerChat();
    const db = chat.gated.db;
    upsertMember(db, chat.group, 'web:ada', 'owner');
    db.prepare(
      `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES (?, 1, 'Bash', '*', 'ask')`,
    ).run(chat.group);
    const first = chat.send('BASH echo approved | tee approved.txt');
    const question = await until(
      () =>
        db
          .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%/approve %'`)
          .pluck()
          .get() as string | undefined,
      30_000,
      'the approval question',
    );
    const also = chat.send('and also this');
    // The follow-up reached the agent (steered into the turn) while the question waits.
    await until(
      () => db.prepare(`SELECT turn FROM messages WHERE id = ?`).pluck().get(also) !== null,
      10_000,
      'the steer',
    );
    chat.send(`/approve ${/\/approve ([A-Z0-9]{5})/.exec(question)![1]!}`);
    await answeredOnce(chat, first, also, 'Tool Bash said: approved');
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
