/**
 * What a run leaves for the operator: a failed run is a warning with its reason in the log (an ended run
 * is info), and the run's session_log row names the session it served, also on the key's first run.
 */
import pino from 'pino';
import { expect, it } from 'vitest';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready, useQueueClock } from './helpers.js';

interface Line {
  level: number;
  msg: string;
  [k: string]: unknown;
}

const queues = useQueueClock({ leftTimers: false });

/** A hand-driven queue whose log lines (info and up) are kept. */
function setup() {
  const { db } = freshDb();
  const lines: Line[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) });
  const h = handQueue(db, { idleTimeoutMs: 1000, log });
  queues.push(h.queue);
  const runLines = () => lines.filter((l) => l.runId !== undefined && /^run (ended|failed)/.test(l.msg));
  return { db, ...h, runLines };
}

const WARN = 40;
const INFO = 30;

it('logs a failed run at warn with its reason and the last line the agent wrote to stderr', async () => {
  const { db, queue, runtime, runLines } = setup();
  ready(db, { chat: 'tg:A' });
  queue.wake();
  await flush();
  runtime.agents[0]!.finish({
    code: 75,
    stderrTail: 'starting\nclaude agent: the API could not serve the turn\n\n',
  });
  await flush();
  expect(runLines()).toEqual([
    expect.objectContaining({
      level: WARN,
      msg: 'run failed: exit code 75',
      result: 'error',
      error: 'exit code 75',
      stderr: 'claude agent: the API could not serve the turn',
    }),
  ]);
});

it('logs a run that ended well at info', async () => {
  const { db, queue, runtime, runLines } = setup();
  ready(db, { chat: 'tg:A' });
  queue.wake();
  await flush();
  runtime.agents[0]!.reply('done', { newSessionId: 's-1' });
  await flush();
  runtime.agents[0]!.finish({ code: 0 });
  await flush();
  expect(runLines().map((l) => [l.level, l.msg, l.result])).toEqual([[INFO, 'run ended', 'ok']]);
});

it("fills the run's session_id when the agent reports the session it started", async () => {
  const { db, queue, runtime } = setup();
  ready(db, { chat: 'tg:A' });
  queue.wake();
  await flush();
  const sessionOfRun = () => db.prepare('SELECT session_id FROM session_log ORDER BY id DESC').pluck().get();
  expect(sessionOfRun()).toBeNull();
  runtime.agents[0]!.reply('hi', { newSessionId: 's-new' });
  await flush();
  expect(sessionOfRun()).toBe('s-new');
  expect(db.prepare('SELECT session_id FROM sessions').pluck().get()).toBe('s-new');

  // The next run resumes it, and its row names it from the start.
  runtime.agents[0]!.finish({ code: 0 });
  await flush();
  ready(db, { chat: 'tg:A' });
  queue.wake();
  await flush();
  expect(runtime.agents[1]!.inputs()[0]).toMatchObject({ sessionId: 's-new' });
  expect(sessionOfRun()).toBe('s-new');
});
