/**
 * A turn cut off by kill -9 before any tool result: the prompt is sent again once, without a placeholder,
 * the earlier turns of the session kept. The shared world: claude-resume-support.ts.
 */
import { expect, test } from 'vitest';
import { exited, until } from '../helpers/process.js';
import { slowText } from '../infra/messages-api.js';
import { api, texts, useResumeApi, world } from './claude-resume-support.js';

useResumeApi();

test('a turn cut off by kill -9 before any tool result is sent again once, without a placeholder', async () => {
  const w = world();
  const first = await w.start();
  const hello = w.send('hello before the crash');
  await until(() => w.replies(hello).length > 0, 60_000, 'the first answer');
  const [session] = w.sessions();

  const asked = 'SLOW 2';
  const cut = w.send(asked);
  await w.cutAfter(first, asked);
  const before = api.turns.length;

  const second = await w.start();
  await until(() => w.replies(cut).length > 0, 60_000, 'the answer after the restart');
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);

  // The session went back to before the cut-off prompt, which came once: earlier turns kept.
  const resumed = api.turns.slice(before);
  expect(resumed).toHaveLength(1);
  const words = api.seenUserWords(resumed[0]!);
  expect(words).toEqual(['hello before the crash', asked]);
  expect(texts(resumed[0]!).join('\n')).not.toContain('No response requested');
  expect(texts(resumed[0]!).join('\n')).not.toContain('Continue the turn');
  expect(w.replies(cut)).toEqual([slowText(2)]);
  expect(w.sessions()).toEqual([session]);
  w.close();
}, 180_000);
