/**
 * The Discord channel: real discord.js (gateway websocket and REST) against the local Discord server
 * (test/infra/discord-api.ts), a real SQLite database and the real delivery.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { DiscordChannel } from '../../channels/discord/index.js';
import { createDelivery } from '../../delivery/delivery.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { DiscordApiServer, type DiscordFault, type DiscordUser } from '../infra/discord-api.js';
import { manualSleep } from '../delivery/script-channel.js';
import { channelConformance, type ConformanceFault } from './conformance.js';
import { cleanupAfterEach, inboundRows, recordingSink, sendFailure, testPart } from './support.js';

const ada: DiscordUser = { id: '700000000000000042', username: 'ada', global_name: 'Ada Lovelace' };

const FAULTS: Record<ConformanceFault, DiscordFault> = {
  rate_limited: { status: 429, retryAfterS: 2 },
  server_error: { status: 502 },
  forbidden: { status: 403 },
};

const channelFor = (api: DiscordApiServer) =>
  new DiscordChannel({ token: api.token, apiRoot: api.apiRoot, log: silentLogger() });

channelConformance(
  'discord',
  async () => {
    const api = await DiscordApiServer.start();
    // The last event the gateway sent (a message or a press), for a resume that replays it.
    let replayLast: (() => void) | undefined;
    const users = new Map<string, DiscordUser>();
    const userOf = (name: string) => {
      let u = users.get(name);
      if (!u)
        users.set(
          name,
          (u = { id: `7100000000000000${10 + users.size}`, username: name, global_name: null }),
        );
      return u;
    };
    return {
      jid: `discord:${api.textChannelId}`,
      makeChannel: () => channelFor(api),
      async inject(text) {
        const last = api.push({ channelId: api.textChannelId, author: ada, content: text });
        replayLast = () => api.replay(last);
        return { sender: ada.id, verb: 'message', platform_msg_id: last.id as string, content: text };
      },
      async redeliverLast() {
        replayLast!();
      },
      received: () =>
        api.posted
          .filter((p) => p.channel_id === api.textChannelId)
          .map((p) => ({ text: p.content, replyTo: p.message_reference?.message_id ?? null })),
      shown: () => api.shown(api.textChannelId).map((m) => m.content),
      failNext: (fault, n) => api.failNext(FAULTS[fault], n),
      retryAfterMs: 2000,
      close: () => api.close(),
      async press(id, index, name) {
        const user = userOf(name);
        const label = api.buttonsOn(id)[index]!.label;
        const p = api.press(api.textChannelId, id, user, label);
        replayLast = () => api.replayPress(p);
        return { sender: user.id };
      },
      buttonsOf: (id) => api.buttonsOn(id).map((b) => b.custom_id),
      textOf: (id) => api.shown(api.textChannelId).find((m) => m.id === id)?.content ?? '',
    };
  },
  {
    redelivery: true,
    faults: ['rate_limited', 'server_error', 'forbidden'],
    drafts: true,
    buttons: true,
  },
);

describe('discord channel', () => {
  const defer = cleanupAfterEach();

  async function setup() {
    const api = await DiscordApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const channel = channelFor(api);
    await channel.start(rec.sink);
    defer(() => channel.stop());
    return { api, db, rec, channel };
  }

  it('tells mentions and replies to the bot apart in channels, threads and DMs, and ignores bots', async () => {
    const { api, db, rec, channel } = await setup();
    const bot = api.bot;
    const mine = await channel.send(testPart(`discord:${api.textChannelId}`, { text: 'an earlier answer' }));
    api.push({ channelId: api.textChannelId, author: bot, content: 'my own message' });
    api.push({
      channelId: api.textChannelId,
      author: { ...ada, id: '3', bot: true },
      content: 'another bot',
    });
    api.push({
      channelId: api.textChannelId,
      author: ada,
      nick: 'Countess',
      content: `<@${bot.id}> hello`,
      mentions: [bot],
    });
    api.push({ channelId: api.textChannelId, author: ada, content: 'thanks', replyTo: mine! });
    api.push({
      channelId: api.threadId,
      author: ada,
      content: `what does <@!${bot.id}> think?`,
      mentions: [bot],
    });
    api.push({ channelId: api.dmChannelId, author: ada, content: 'just us' });
    await rec.waitCalls(4);
    const rows = inboundRows(db).map(({ chat_jid, verb, content, reply_to, sender, sender_name }) => ({
      chat_jid,
      verb,
      content,
      reply_to,
      sender,
      sender_name,
    }));
    const text = `discord:${api.textChannelId}`;
    expect(rows).toEqual([
      {
        chat_jid: text,
        verb: 'mention',
        content: 'hello',
        reply_to: null,
        sender: ada.id,
        sender_name: 'Countess',
      },
      {
        chat_jid: text,
        verb: 'reply',
        content: 'thanks',
        reply_to: mine,
        sender: ada.id,
        sender_name: 'Ada Lovelace',
      },
      {
        chat_jid: `discord:${api.threadId}`,
        verb: 'mention',
        content: 'what does @gated think?',
        reply_to: null,
        sender: ada.id,
        sender_name: 'Ada Lovelace',
      },
      {
        chat_jid: `discord:${api.dmChannelId}`,
        verb: 'message',
        content: 'just us',
        reply_to: null,
        sender: ada.id,
        sender_name: 'Ada Lovelace',
      },
    ]);
  });

  it('answers with a message reference on the first part only, and never pings @everyone or roles', async () => {
    const { api, db, rec, channel } = await setup();
    const msg = api.push({
      channelId: api.textChannelId,
      author: ada,
      content: `<@${api.bot.id}> long please`,
      mentions: [api.bot],
    });
    await rec.waitCalls(1);
    const content = `@everyone ${'word '.repeat(500)}`;
    insertOutbound(db, {
      chat_jid: `discord:${api.textChannelId}`,
      content,
      kind: 'reply',
      reply_to: msg.id as string,
    });
    const d = createDelivery({ db, channels: [channel], log: silentLogger(), pollMs: 0 });
    defer(() => d.stop());
    d.start();
    await d.idle();
    expect(api.posted.map((p) => p.message_reference?.message_id)).toEqual([msg.id, undefined]);
    for (const p of api.posted) expect(p.allowed_mentions).toEqual({ parse: ['users'], replied_user: true });
  });

  it('maps send errors: 400 and 404 permanent, 429 with its retry-after, 5xx and network down transient', async () => {
    const { api, channel } = await setup();
    const part = testPart(`discord:${api.textChannelId}`);
    const failure = (p = part) => sendFailure(channel, p);
    api.failNext({ status: 400 });
    expect(await failure()).toMatchObject({ failure: 'permanent', status: 400 });
    expect(await failure({ ...part, text: '' })).toMatchObject({ failure: 'permanent', status: 400 });
    expect(await failure({ ...part, chatJid: 'telegram:5' })).toMatchObject({ failure: 'permanent' });
    api.failNext({ status: 429, retryAfterS: 3 });
    const limited = await failure();
    expect(limited).toMatchObject({ failure: 'rate_limited', status: 429 });
    expect(limited!.retryAfterMs).toBeGreaterThanOrEqual(3000);
    api.failNext({ status: 503 });
    expect(await failure({ ...part, chatJid: `discord:${api.threadId}` })).toMatchObject({
      failure: 'transient',
      status: 503,
    });
    await api.close();
    expect(await failure({ ...part, chatJid: `discord:${api.dmChannelId}` })).toMatchObject({
      failure: 'transient',
    });
  });

  it('comes up when the API answers again after an outage at start', async () => {
    const api = await DiscordApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const s = manualSleep(true);
    // discord.js retries a 5xx three times itself: eight failures make two failed connection attempts.
    api.failGateway(8);
    const channel = new DiscordChannel({
      token: api.token,
      apiRoot: api.apiRoot,
      log: silentLogger(),
      sleep: s.sleep,
    });
    await channel.start(rec.sink);
    defer(() => channel.stop());
    await api.waitForIdentify();
    // Events pushed after IDENTIFY queue behind READY and GUILD_CREATE; discord.js handles them in order.
    const user = { id: '700000000000000042', username: 'ada', global_name: 'Ada' };
    api.push({ channelId: api.textChannelId, author: user, content: 'after the outage' });
    await rec.waitCalls(1);
    expect(rec.seen.map((m) => m.content)).toEqual(['after the outage']);
    expect(s.waits).toHaveLength(2);
    expect(api.requests.filter((r) => r === 'GET /api/v10/gateway/bot')).toHaveLength(9);
  });

  it('fails the start, instead of hanging, when the gateway refuses the intents', async () => {
    const api = await DiscordApiServer.start();
    defer(() => api.close());
    api.closeIdentifyWith = 4014;
    const channel = channelFor(api);
    await expect(channel.start(() => null)).rejects.toMatchObject({
      name: 'DiscordGatewayClosed',
      closeCode: 4014,
    });
  });

  it('refuses to start with a bad token, without the token in the error', async () => {
    const api = await DiscordApiServer.start('right-token');
    defer(() => api.close());
    const channel = new DiscordChannel({
      token: 'wrong-secret-token',
      apiRoot: api.apiRoot,
      log: silentLogger(),
    });
    const err = await channel
      .start(() => null)
      .then(
        () => undefined,
        (e: Error) => e,
      );
    expect(err).toBeInstanceOf(Error);
    expect(String(err?.message)).not.toContain('wrong-secret-token');
  });

  it('shows typing and never throws from it', async () => {
    const { api, channel } = await setup();
    await channel.typing(`discord:${api.textChannelId}`, true);
    await channel.typing(`discord:${api.textChannelId}`, false);
    expect(api.requests.filter((r) => r.endsWith('/typing'))).toEqual([
      `POST /api/v10/channels/${api.textChannelId}/typing`,
    ]);
    await api.close();
    await expect(channel.typing(`discord:${api.textChannelId}`, true)).resolves.toBeUndefined();
  });
});
