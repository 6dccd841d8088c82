/**
 * Steering scenarios of the Claude agent (CONTRACT §19) that the process-runtime and docker-runtime suites
 * share: a message steered into a turn while a Bash command runs or while the command's approval waits, and
 * `/interrupt` cutting a streamed turn. Each takes a started chat (claude-support.ts) and its Messages API.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { until } from '../helpers/process.js';
import type { MessagesApiServer } from '../infra/messages-api.js';
import { requestFor, runsEnded, type ClaudeChat } from './claude-support.js';

/** Far beyond what the tests wait: a turn held open shows as a missing reply, not as a killed run. */
export const RUN_TIMEOUT_MS = '300000';

/** The replies stored for inbound row `id`. */
export function repliesTo(c: ClaudeChat, id: number): string[] {
  return c.gated.db
    .prepare(
      `SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ? AND kind = 'reply' ORDER BY id`,
    )
    .pluck()
    .all(id) as string[];
}

function steerMode(chat: ClaudeChat): void {
  chat.gated.db.prepare(`UPDATE registered_groups SET busy = 'steer' WHERE folder = ?`).run(chat.group);
}

/**
 * The two messages were answered by one reply (to the newest), the model saw the follow-up inside the
 * turn, and the run ended by its idle timeout (result ok), not killed.
 */
async function answeredOnce(
  chat: ClaudeChat,
  api: MessagesApiServer,
  [first, also]: [number, number],
  tool: string,
): Promise<void> {
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
  const folded = api.turns.filter((r) => JSON.stringify(r.body.messages).includes('and also this'));
  expect(folded.length).toBeGreaterThan(0);
  expect(JSON.stringify(folded[0]!.body.messages)).toContain('tool_result');
  expect(folded.some((r) => api.seenUserWords(r).some((w) => w.includes('and also this')))).toBe(false);
}

/** Steer mode: a follow-up while a Bash command runs is folded into the turn and answered once. */
export async function steerWhileBashScenario(chat: ClaudeChat, api: MessagesApiServer): Promise<void> {
  steerMode(chat);
  const first = chat.send('BASH touch started; sleep 4; echo slept');
  // The command runs (and its result has not come back).
  await until(() => existsSync(join(chat.groupDir, 'started')), 30_000, 'the command to start');
  const also = chat.send('and also this');
  await answeredOnce(chat, api, [first, also], 'Tool Bash said: slept');
}

/**
 * Steer mode: a follow-up while a Bash command's approval waits is folded into the turn and answered once.
 */
export async function steerWhileApprovalScenario(chat: ClaudeChat, api: MessagesApiServer): Promise<void> {
  steerMode(chat);
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
  expect(existsSync(join(chat.groupDir, 'approved.txt'))).toBe(false);
  chat.send(`/approve ${/\/approve ([A-Z0-9]{5})/.exec(question)![1]!}`);
  await answeredOnce(chat, api, [first, also], 'Tool Bash said: approved');
}

/** The conversation request streaming `words`, once it has streamed for a while (drafts are out). */
export async function streaming(api: MessagesApiServer, words: string) {
  const req = await until(
    () => api.turns.find((r) => api.seenUserWords(r).at(-1)?.includes(words)),
    60_000,
    `the request for '${words}'`,
  );
  // The agent prints a draft every 400 ms: by now gated knows it numbers its turns.
  await new Promise((r) => setTimeout(r, 2000));
  expect(req.cutMs, 'the stream still runs').toBeNull();
  return req;
}

/**
 * `/interrupt better idea` mid-stream: the stream is cut before its end, the new message is the next turn, each
 * answered once, the cut one with what it had and the mark.
 */
export async function interruptScenario(chat: ClaudeChat, api: MessagesApiServer): Promise<void> {
  const long = chat.send('SLOW 40');
  const req = await streaming(api, 'SLOW 40');
  const sentAt = Date.now();
  const better = chat.send('/interrupt better idea');

  // Cut, not ended: the server records cutMs only for a stream closed before its 40 s were sent (timed
  // against the send no longer, a loaded machine takes seconds more).
  const cutAt = await until(() => req.cutMs, 30_000, 'the stream to be cut');
  expect(cutAt).toBeGreaterThanOrEqual(sentAt);
  expect(await chat.reply(better)).toBe('echo: better idea');
  // The model's next request carries the new message, after the interrupted turn.
  const next = requestFor(api, 'better idea');
  expect(api.turns.indexOf(next)).toBeGreaterThan(api.turns.indexOf(req));
  // The interrupted turn is answered with what it had streamed: numbered lines, far from all of them.
  const cut = await chat.reply(long);
  expect(cut).toMatch(/^line 0001 of the long answer/);
  expect(cut.split('\n').length).toBeLessThan(800);
  expect(cut).toMatch(/long answer\n\n…\(interrupted\)$/);
  await runsEnded(chat);
  expect(repliesTo(chat, long)).toHaveLength(1);
  expect(repliesTo(chat, better)).toHaveLength(1);
  const states = chat.gated.db
    .prepare(`SELECT state, turn FROM messages WHERE id IN (?, ?) ORDER BY id`)
    .all(long, better) as Array<{ state: string; turn: number }>;
  expect(states).toEqual([
    { state: 'done', turn: 1 },
    { state: 'done', turn: 2 },
  ]);
  expect(chat.runs()).toHaveLength(1);
}
