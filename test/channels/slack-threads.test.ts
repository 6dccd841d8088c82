/**
 * Slack threads as topics or as replies, as each group chooses (registered_groups.threads, docs/CHANNELS.md):
 * the whole gateway (startE2eGated, process runtime, example agent) and the real Slack clients over Socket
 * Mode against the local Slack server. Two channels, each routed to a group of its own: in `topics` each
 * thread is a session, in `replies` the channel is one session; both answer in the thread of the message.
 */
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { setThreadMode } from '../../store/groups.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { startE2eGated } from './e2e.js';

let api: SlackApiServer | undefined;
let gated: Gated | undefined;

const ADA = 'U0ADA001';

test('a group with threads as topics runs a session per thread; one with replies runs the channel as one', async () => {
  api = closedAfterGateds(await SlackApiServer.start());
  gated = await startE2eGated(
    { SLACK_BOT_TOKEN: api.botToken, SLACK_APP_TOKEN: api.appToken, SLACK_API_URL: api.apiUrl },
    {
      groups: [
        ['sl/topics', 'threads as topics'],
        ['sl/replies', 'threads as replies'],
      ],
      routes: [
        [10, 'chat_jid=slack:C0TOPICS', 'sl/topics'],
        [20, 'chat_jid=slack:C0REPLIES', 'sl/replies'],
      ],
    },
  );
  expect(setThreadMode(gated.db, 'sl/replies', 'replies')).toBe(true);
  await api.waitConnected();

  /** Ada writes in `channel` (in `thread` when given); resolves with the message's ts once it is answered. */
  const say = async (channel: string, text: string, thread?: string) => {
    const before = api!.posted.length;
    const ev = api!.messageEvent({ channel, user: ADA, text, ...(thread ? { thread_ts: thread } : {}) });
    await api!.waitAck(api!.pushEvent(api!.callback(ev)));
    await until(() => api!.posted.length > before, 15_000, `the answer to '${text}'`);
    return ev.ts as string;
  };
  const conversation = async (channel: string) => {
    const a = await say(channel, `<@${api!.botUserId}> one`);
    await say(channel, 'two', a);
    const b = await say(channel, `<@${api!.botUserId}> three`);
    return { a, b };
  };
  const seen = (channel: string) => ({
    rows: gated!.db
      .prepare(
        `SELECT content, topic, session_topic FROM messages WHERE is_from_me = 0 AND chat_jid = ? ORDER BY id`,
      )
      .all(`slack:${channel}`),
    answers: api!.posted
      .filter((p) => p.channel === channel)
      .map((p) => ({ text: p.text, thread: p.thread_ts })),
  });

  const t = await conversation('C0TOPICS');
  expect(seen('C0TOPICS')).toEqual({
    rows: [
      { content: 'one', topic: t.a, session_topic: t.a },
      { content: 'two', topic: t.a, session_topic: t.a },
      { content: 'three', topic: t.b, session_topic: t.b },
    ],
    answers: [
      { text: 'echo: one', thread: t.a },
      { text: 'echo: two', thread: t.a },
      { text: 'echo: three', thread: t.b },
    ],
  });

  const r = await conversation('C0REPLIES');
  expect(seen('C0REPLIES')).toEqual({
    rows: [
      { content: 'one', topic: r.a, session_topic: '' },
      { content: 'two', topic: r.a, session_topic: '' },
      { content: 'three', topic: r.b, session_topic: '' },
    ],
    answers: [
      { text: 'echo: one', thread: r.a },
      { text: 'echo: two', thread: r.a },
      { text: 'echo: three', thread: r.b },
    ],
  });

  // Commands in a thread speak of the session the thread is part of, and are answered in the thread.
  await say('C0TOPICS', '/ping', t.a);
  await say('C0REPLIES', '/ping', r.a);
  const pings = api.posted
    .slice(-2)
    .map((p) => ({ group: /group: (\S+(?: #\S+)?)/.exec(p.text)?.[1], thread: p.thread_ts }));
  expect(pings).toEqual([
    { group: `sl/topics #${t.a}`, thread: t.a },
    { group: 'sl/replies', thread: r.a },
  ]);

  // /new in a thread that is a topic starts that thread afresh; where threads are replies, the channel.
  await say('C0TOPICS', '/new', t.a);
  await say('C0REPLIES', '/new', r.a);
  expect(api.posted.slice(-2).map((p) => [p.text, p.thread_ts])).toEqual([
    [`new session for sl/topics#${t.a}`, t.a],
    ['new session for sl/replies', r.a],
  ]);

  // The runs' session keys: two threads of the first group, the one channel session of the second.
  const keys = gated.db
    .prepare(`SELECT DISTINCT group_folder AS "group", topic FROM session_log ORDER BY group_folder, topic`)
    .all();
  expect(keys).toEqual([
    { group: 'sl/replies', topic: '' },
    { group: 'sl/topics', topic: t.a },
    { group: 'sl/topics', topic: t.b },
  ]);
});
