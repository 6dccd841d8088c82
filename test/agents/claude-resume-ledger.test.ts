/**
 * A session's first turn cut off by kill -9 after an action: gated never learned the session, which is
 * found again through the agent's ledger, and the action is applied once. The shared world: claude-resume-support.ts.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { exited, until } from '../helpers/process.js';
import { slowText } from '../infra/messages-api.js';
import { api, expectGoneOn, useResumeApi, world } from './claude-resume-support.js';

useResumeApi();

test("a session's first turn cut off after an action: found through the agent's ledger, the action applied once", async () => {
  const w = world();
  const first = await w.start();
  const asked = 'TOOL schedule {"every":"1h","text":"check the backups"} THEN SLOW 2';
  const cut = w.send(asked);
  await w.cutAfter(first, 'Recorded: a task');
  // gated never learned the session: no answer of it was stored.
  expect(w.sessions()).toEqual([]);
  const projects = join(w.groupDir, '.claude-agent', 'projects');
  const transcripts = () =>
    readdirSync(projects).flatMap((d) => readdirSync(join(projects, d)).filter((f) => f.endsWith('.jsonl')));
  const [transcript] = transcripts();
  const before = api.turns.length;

  const second = await w.start();
  await until(() => w.replies(cut).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  expectGoneOn(api.turns.slice(before), asked, 'Recorded: a task (1h)');
  expect(w.replies(cut)).toEqual([slowText(2)]);
  // The same session went on, and the task the model recorded before the crash was applied once.
  expect(transcripts()).toEqual([transcript]);
  expect(w.sessions()).toEqual([transcript!.replace(/\.jsonl$/, '')]);
  expect(w.watch.prepare(`SELECT kind, spec, text FROM tasks`).all()).toEqual([
    { kind: 'every', spec: '1h', text: 'check the backups' },
  ]);
  w.close();
}, 180_000);
