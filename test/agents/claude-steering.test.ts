/**
 * Steering a turn in progress (docs/PROTOCOL.md) with the Claude agent under the process runtime, against the
 * local Messages API streaming a long turn: `/interrupt better idea` cuts the stream and the new message is
 * the next turn; `steer` mode shows a message to the model inside the turn and answers both with one block;
 * a context that is too long is compacted once, then answered.
 */
import { expect, test } from 'vitest';
import { until } from '../helpers/process.js';
import { requestFor, runsEnded, useClaudeSuite } from './claude-support.js';
import { interruptScenario, repliesTo, streaming } from './claude-steer-support.js';

const suite = useClaudeSuite();

test(
  '/interrupt better idea mid-stream: the stream is cut, the new message is the next turn, one answer each',
  { timeout: 120_000 },
  async () => {
    await interruptScenario(await suite.start(), suite.api);
  },
);

test(
  'steer mode: a message mid-turn reaches the model inside the turn; one block answers both',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start();
    chat.gated.db.prepare(`UPDATE registered_groups SET busy = 'steer' WHERE folder = ?`).run(chat.group);
    const long = chat.send('SLOW 5');
    await streaming(suite.api, 'SLOW 5');
    const also = chat.send('and also this');
    const answer = await chat.reply(also);
    expect(answer).toContain('line 0001 of the long answer');
    expect(answer).toContain('echo: and also this');
    // One reply for both: it answers the newest message; the first one has none of its own.
    expect(repliesTo(chat, long)).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 1000));
    expect(repliesTo(chat, also)).toEqual([answer]);
    const states = chat.gated.db
      .prepare(`SELECT state FROM messages WHERE id IN (?, ?)`)
      .pluck()
      .all(long, also);
    expect(states).toEqual(['done', 'done']);
    // The model saw the long answer it was giving before the steered message.
    const seen = requestFor(suite.api, 'and also this');
    expect(seen.body.messages.some((m) => m.role === 'assistant')).toBe(true);
    expect(chat.runs()).toHaveLength(1);
  },
);

test(
  'a prompt too long: the session is compacted once, then the turn is answered',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start();
    const id = chat.send('TOOLONG please');
    expect(await chat.reply(id)).toContain('echo: TOOLONG please');
    expect(suite.api.requests.filter((r) => r.status === 400)).toHaveLength(1);
    const runs = chat.gated.db
      .prepare(`SELECT compacted, replies FROM session_log WHERE group_folder = ?`)
      .all(chat.group) as Array<{ compacted: number | null; replies: number }>;
    expect(runs).toEqual([{ compacted: 1, replies: 1 }]);
    expect(repliesTo(chat, id)).toHaveLength(1);
  },
);

test(
  'a session that cannot be compacted says so once with the way out (/new), and the model is not asked again',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start();
    const id = chat.send('HUGE context please');
    expect(await chat.reply(id)).toMatch(
      /^This conversation has grown too long for the model, and compacting it failed \(.+\)\. Send \/new to start a fresh conversation/,
    );
    const refused = suite.api.requests.length;
    // The same run, and a later run of the same session: a short answer, no request to the model.
    const again = chat.send('hello again');
    expect(await chat.reply(again)).toBe(
      'This conversation is still too long for the model to go on, and it cannot be compacted: send /new to start afresh.',
    );
    await runsEnded(chat);
    const later = chat.send('and later');
    expect(await chat.reply(later)).toMatch(/^This conversation is still too long/);
    expect(suite.api.requests.length).toBe(refused);
    expect(chat.runs()).toHaveLength(2);
    // /new starts afresh: answered by the model.
    await runsEnded(chat);
    chat.send('/new');
    await until(() => chat.gated.db.prepare(`SELECT COUNT(*) FROM sessions`).pluck().get() === 0);
    const fresh = chat.send('a fresh start');
    expect(await chat.reply(fresh)).toBe('echo: a fresh start');
  },
);
