/**
 * A turn cut off by kill -9 after its tools ran, with a message steered into it (steer mode), goes on once
 * after the restart: each message once, no placeholder, the MCP tool never again. The shared world: claude-resume-support.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { exited, until } from '../helpers/process.js';
import { slowText } from '../infra/messages-api.js';
import { AGENT, api, expectGoneOn, useResumeApi, world } from './claude-resume-support.js';

useResumeApi();

test('a turn cut off by kill -9 after its tools ran, with a message steered into it, goes on once: each message once, no placeholder, no tool again', async () => {
  // Steer mode: the follow-up is folded into the turn while its Bash command runs (the CLI keeps it in the
  // transcript as a queued_command attachment), and asks for the MCP tool; the turn is cut while the model
  // streams after that tool's result.
  const w = world({ GATED_AGENT_CMD: `GATED_CLAUDE_SHELL=1 IS_SANDBOX=1 ${AGENT}` });
  const lookups = () => readFileSync(join(w.groupDir, 'demo-lookups.log'), 'utf8');
  w.steer();
  const first = await w.start();
  const hello = w.send('hello before the crash');
  await until(() => w.replies(hello).length > 0, 60_000, 'the first answer');
  const [session] = w.sessions();

  const asked = 'BASH touch started; sleep 3; echo slept THEN SLOW 2';
  const cut = w.send(asked);
  await until(() => existsSync(join(w.groupDir, 'started')), 30_000, 'the command to start');
  const steered = 'and also this TOOL lookup {"query":"anchor"}';
  const also = w.send(steered);
  await w.cutAfter(first, 'definition of anchor');
  expect(lookups()).toBe('anchor\n');
  expect(w.replies(cut)).toEqual([]);
  expect(w.replies(also)).toEqual([]);
  const before = api.turns.length;

  const second = await w.start();
  await until(() => w.replies(also).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  expectGoneOn(api.turns.slice(before), asked, 'definition of anchor (token ok)');
  // The steered message once in the model's context (twice before: kept in the transcript and sent again).
  const context = JSON.stringify(api.turns.at(-1)!.body.messages);
  expect(context.split('and also this').length - 1).toBe(1);
  // The MCP tool ran once in all (and no request after the restart called any tool); the answer is the one streamed after the MCP tool's result, stored once.
  expect(lookups()).toBe('anchor\n');
  expect(w.replies(also)).toEqual([slowText(2)]);
  expect(w.replies(cut)).toEqual([]);
  expect(w.sessions()).toEqual([session]);
  w.close();
}, 180_000);
