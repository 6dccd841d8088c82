/**
 * The Telegram channel: real telegraf against the local Bot API server (test/infra/telegram-api.ts), a real
 * SQLite database and the real delivery.
 */
import type { Chat, User } from 'telegraf/types';
import { describe, expect, it } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { silentLogger } from '../../core/log.js';
import { TELEGRAM_OFFSET_KEY, TelegramChannel } from '../../channels/telegram/index.js';
import { createDelivery } from '../../delivery/delivery.js';
import type { Db } from '../../store/db.js';
import { insertOutbound } from '../../store/messages.js';
import { getState } from '../../store/state.js';
import { freshDb } from '../helpers/db.js';
import { manualSleep } from '../delivery/script-channel.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { channelConformance, type ConformanceFault } from './conformance.js';
import { cleanupAfterEach, inboundRows, recordingSink, sendFailure, testPart } from './support.js';

const group: Chat.SupergroupChat = { id: -1001234567890, type: 'supergroup', title: 'Test group' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada', last_name: 'Lovelace', username: 'ada' };

function channelFor(
  api: TelegramApiServer,
  db: Db,
  extra: Partial<ConstructorParameters<typeof TelegramChannel>[0]> = {},
) {
  return new TelegramChannel({
    token: api.token,
    apiRoot: api.url,
    db,
    log: silentLogger(),
    pollTimeoutS: 5,
    ...extra,
  });
}

const FAULTS: Record<ConformanceFault, Parameters<TelegramApiServer['failNext']>[1]> = {
  rate_limited: { status: 429, retryAfterS: 2 },
  server_error: { status: 502 },
  forbidden: { status: 403 },
};

channelConformance('telegram', async () => {
  const api = await TelegramApiServer.start();
  api.addChat(group);
  return {
    jid: `telegram:${group.id}`,
    makeChannel: (db) => channelFor(api, db),
    async inject(text) {
      const msg = api.message({ chat: group, from: ada, text });
      return { sender: '42', verb: 'message', platform_msg_id: String(msg.message_id), content: text };
    },
    async redeliverLast() {
      api.redeliver(api.lastUpdate!);
    },
    received: () =>
      api.sent
        .filter((s) => s.chat_id === group.id)
        .map((s) => ({
          text: s.text,
          replyTo: s.reply_to_message_id === undefined ? null : String(s.reply_to_message_id),
        })),
    // The server keeps sent messages as they are now: edits applied, deleted ones removed.
    shown: () => api.sent.filter((s) => s.chat_id === group.id).map((s) => s.text),
    failNext: (fault, n) => api.failNext('sendMessage', FAULTS[fault], n),
    retryAfterMs: 2000,
    close: () => api.close(),
  };
});

describe('telegram channel', () => {
  const defer = cleanupAfterEach();

  async function setup() {
    const api = await TelegramApiServer.start();
    defer(() => api.close());
    const { db, reopen } = freshDb();
    const rec = recordingSink(db);
    const channel = channelFor(api, db);
    await channel.start(rec.sink);
    defer(() => channel.stop());
    return { api, db, reopen, rec, channel };
  }

  it('tells mentions, replies to the bot, commands, DMs, edits, reactions and joins apart', async () => {
    const { api, db, rec } = await setup();
    const bot = api.bot;
    const earlier = api.serviceMessage(group, bot, { text: 'an earlier answer' });
    const mention = '@gated_test_bot what is new?';
    api.message({
      chat: group,
      from: ada,
      text: mention,
      entities: [{ type: 'mention', offset: 0, length: 15 }],
    });
    api.message({ chat: group, from: ada, text: 'hey @Gated_Test_Bot, you there?' });
    api.message({ chat: group, from: ada, text: 'thanks!', replyTo: earlier });
    const cmd = api.message({
      chat: group,
      from: ada,
      text: '/ping@gated_test_bot',
      entities: [{ type: 'bot_command', offset: 0, length: 20 }],
    });
    const dm: Chat.PrivateChat = { id: 42, type: 'private', first_name: 'Ada' };
    api.message({ chat: dm, from: ada, text: 'just us' });
    api.inject({ edited_message: { ...cmd, text: '/ping@gated_test_bot now', edit_date: cmd.date + 5 } });
    api.inject({
      message_reaction: {
        chat: group,
        message_id: cmd.message_id,
        user: ada,
        date: cmd.date + 6,
        old_reaction: [],
        new_reaction: [{ type: 'emoji', emoji: '👍' }],
      },
    });
    const bob: User = { id: 43, is_bot: false, first_name: 'Bob' };
    api.inject({
      message: { message_id: 90, date: cmd.date + 7, chat: group, from: bob, new_chat_members: [bob] },
    } as never);
    await rec.waitCalls(8);
    const rows = inboundRows(db).map(({ chat_jid, verb, content, reply_to, sender, sender_name }) => ({
      chat_jid,
      verb,
      content,
      reply_to,
      sender,
      sender_name,
    }));
    const g = `telegram:${group.id}`;
    const who = { sender: '42', sender_name: 'Ada Lovelace' };
    expect(rows).toEqual([
      { chat_jid: g, verb: 'mention', content: 'what is new?', reply_to: null, ...who },
      { chat_jid: g, verb: 'mention', content: 'hey @Gated_Test_Bot, you there?', reply_to: null, ...who },
      { chat_jid: g, verb: 'reply', content: 'thanks!', reply_to: String(earlier), ...who },
      { chat_jid: g, verb: 'message', content: '/ping@gated_test_bot', reply_to: null, ...who },
      { chat_jid: 'telegram:42', verb: 'message', content: 'just us', reply_to: null, ...who },
      { chat_jid: g, verb: 'edit', content: '/ping@gated_test_bot now', reply_to: null, ...who },
      { chat_jid: g, verb: 'reaction', content: '👍', reply_to: String(cmd.message_id), ...who },
      { chat_jid: g, verb: 'join', content: 'Bob', reply_to: null, sender: '43', sender_name: 'Bob' },
    ]);
    const ids = inboundRows(db).map((r) => r.platform_msg_id);
    expect(new Set(ids).size).toBe(8);
    expect(ids[5]).toMatch(new RegExp(`^${cmd.message_id}:edit:\\d+$`));
  });

  it('keeps forum topics: the thread id is the topic and the reply goes back to it', async () => {
    const { api, db, rec, channel } = await setup();
    const forum: Chat.SupergroupChat = { ...group, id: -100777, is_forum: true } as Chat.SupergroupChat;
    api.serviceMessage(forum, ada, { group_chat_created: true });
    const topicId = api.serviceMessage(forum, ada, {
      forum_topic_created: { name: 'support', icon_color: 1 },
    });
    const msg = api.message({ chat: forum, from: ada, text: 'help in the topic', thread: topicId });
    await rec.waitCalls(1);
    expect(inboundRows(db)[0]).toMatchObject({ topic: String(topicId), verb: 'message', reply_to: null });
    const jid = `telegram:${forum.id}`;
    insertOutbound(db, {
      chat_jid: jid,
      content: 'answer in topic',
      kind: 'reply',
      topic: String(topicId),
      reply_to: String(msg.message_id),
    });
    insertOutbound(db, { chat_jid: jid, content: 'answer in General', kind: 'reply', topic: '1' });
    const d = createDelivery({ db, channels: [channel], log: silentLogger(), pollMs: 0 });
    defer(() => d.stop());
    d.start();
    await d.idle();
    expect(api.sent).toEqual([
      {
        chat_id: forum.id,
        message_id: 4,
        text: 'answer in topic',
        reply_to_message_id: msg.message_id,
        message_thread_id: topicId,
        parse_mode: 'HTML',
      },
      {
        chat_id: forum.id,
        message_id: 5,
        text: 'answer in General',
        reply_to_message_id: undefined,
        message_thread_id: undefined,
        parse_mode: 'HTML',
      },
    ]);
  });

  it('persists the update offset: a restart neither replays nor skips', async () => {
    const { api, db, reopen, rec, channel } = await setup();
    // The server forgets nothing, as if every confirmation had been lost: only the stored offset helps.
    api.retainConfirmed = true;
    api.message({ chat: group, from: ada, text: 'one' });
    const two = api.message({ chat: group, from: ada, text: 'two' });
    await rec.waitCalls(2);
    await channel.stop();
    expect(getState(db, TELEGRAM_OFFSET_KEY)).toBe(String(api.lastUpdate!.update_id + 1));
    api.message({ chat: group, from: ada, text: 'three, while down' });

    const db2 = reopen();
    const rec2 = recordingSink(db2);
    const again = channelFor(api, db2);
    await again.start(rec2.sink);
    defer(() => again.stop());
    await rec2.waitCalls(1);
    await api.waitForPoll();
    expect(rec2.seen.map((m) => m.content)).toEqual(['three, while down']);
    expect(inboundRows(db2).map((r) => r.content)).toEqual(['one', 'two', 'three, while down']);
    expect(two.message_id).toBe(2);
  });

  it('waits retry_after when getUpdates is rate limited, backs off on 5xx, and recovers', async () => {
    const api = await TelegramApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const s = manualSleep(true);
    api.failNext('getUpdates', { status: 429, retryAfterS: 7 });
    api.failNext('getUpdates', { status: 502 });
    const channel = channelFor(api, db, { sleep: s.sleep });
    await channel.start(rec.sink);
    defer(() => channel.stop());
    api.message({ chat: group, from: ada, text: 'got through' });
    await rec.waitCalls(1);
    expect(s.waits[0]!.ms).toBe(7000);
    // The second failure in a row: 2 s base, jittered into [1 s, 2 s).
    expect(s.waits[1]!.ms).toBeGreaterThanOrEqual(1000);
    expect(s.waits[1]!.ms).toBeLessThan(2000);
  });

  it('comes up when the API answers again after an outage at start', async () => {
    const api = await TelegramApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const s = manualSleep(true);
    api.failNext('getMe', { status: 502 }, 2);
    const channel = channelFor(api, db, { sleep: s.sleep });
    await channel.start(rec.sink);
    defer(() => channel.stop());
    api.message({ chat: group, from: ada, text: 'after the outage' });
    await rec.waitCalls(1);
    expect(api.count('getMe')).toBe(3);
    expect(s.waits).toHaveLength(2);
    expect(channel.identity).toEqual({ id: api.bot.id, username: 'gated_test_bot' });
  });

  it('refuses to start with a bad token, without the token in the error', async () => {
    const api = await TelegramApiServer.start('999:right-token');
    defer(() => api.close());
    const { db } = freshDb();
    const channel = new TelegramChannel({
      token: '999:wrong-token',
      apiRoot: api.url,
      db,
      log: silentLogger(),
    });
    const err = await channel
      .start(() => null)
      .then(
        () => undefined,
        (e: Error) => e,
      );
    expect(err?.message).toMatch(/401/);
    expect(err?.message).not.toContain('wrong-token');
  });

  it('maps send errors: 400 permanent, 429 rate limited with retry_after, 5xx and network transient', async () => {
    const { api, channel } = await setup();
    api.addChat(group);
    const part = testPart(`telegram:${group.id}`);
    const failure = (p = part) => sendFailure(channel, p);
    api.failNext('sendMessage', { status: 400, description: 'Bad Request: chat not found' });
    expect(await failure()).toMatchObject({ failure: 'permanent', status: 400 });
    api.failNext('sendMessage', { status: 429, retryAfterS: 3 });
    expect(await failure()).toMatchObject({ failure: 'rate_limited', retryAfterMs: 3000, status: 429 });
    api.failNext('sendMessage', { status: 503 });
    expect(await failure()).toMatchObject({ failure: 'transient', status: 503 });
    expect(await failure({ ...part, chatJid: 'discord:1' })).toMatchObject({ failure: 'permanent' });
    await api.close();
    const down = await failure();
    expect(down).toBeInstanceOf(DeliveryError);
    expect(down?.failure).toBe('transient');
  });

  it('sends HTML with parse_mode HTML; a part Telegram cannot parse goes again as plain text', async () => {
    const { api, channel } = await setup();
    api.addChat(group);
    const jid = `telegram:${group.id}`;
    await channel.send(testPart(jid, { text: '<b>bold</b> &amp; <a href="https://x.org/">x</a>' }));
    api.failNext('sendMessage', {
      status: 400,
      description: "Bad Request: can't parse entities: unsupported start tag at byte offset 0",
    });
    await channel.send(testPart(jid, { text: '<b>once more</b> &lt;3' }));
    expect(api.sent.map((s) => [s.parse_mode, s.text])).toEqual([
      ['HTML', '<b>bold</b> &amp; <a href="https://x.org/">x</a>'],
      [undefined, 'once more <3'],
    ]);
    // Another 400 is not a parsing problem: no plain resend, a permanent failure.
    api.failNext('sendMessage', { status: 400, description: 'Bad Request: chat not found' });
    expect(await sendFailure(channel, testPart(jid))).toMatchObject({ failure: 'permanent' });
    expect(api.sent).toHaveLength(2);
  });

  it('shows typing with sendChatAction and never throws from it', async () => {
    const { api, channel } = await setup();
    await channel.typing(`telegram:${group.id}`, true);
    await channel.typing(`telegram:${group.id}`, false);
    expect(api.calls.filter((c) => c.method === 'sendChatAction').map((c) => c.payload)).toEqual([
      { chat_id: String(group.id), action: 'typing' },
    ]);
    await api.close();
    await expect(channel.typing(`telegram:${group.id}`, true)).resolves.toBeUndefined();
  });
});
