/**
 * The Bluesky channel against a real local atproto network (PLC, PDS, AppView on PostgreSQL and Redis),
 * driven by the real @atproto/api on both sides: users post, follow and like, and the channel stores the
 * notifications as inbound rows; the failures of the post path and of the session. The suite every channel
 * passes and the threaded replies: bluesky.test.ts.
 */
import { until } from '../helpers/process.js';
import { describe, expect, test } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { SEEN_KEY } from '../../channels/bluesky/index.js';
import { createDelivery } from '../../delivery/delivery.js';
import { insertOutbound } from '../../store/messages.js';
import { silentLogger } from '../../core/log.js';
import { freshDb } from '../helpers/db.js';
import {
  makeAccounts,
  firstPart,
  makeChannel,
  postAs,
  sinkFor,
  type Accounts,
} from '../infra/atproto/harness.js';
import { startFaultProxy, type Fault } from '../infra/atproto/fault-proxy.js';
import type { Channel } from '../../channels/channel.js';
import { manualSleep } from '../delivery/script-channel.js';
import { net, proxies, rows, startChannel, useBlueskyNetwork } from './bluesky-support.js';

useBlueskyNetwork('bsky_inbound');

describe('inbound notifications', () => {
  test('a mention becomes one row with verb mention, the author as chat and sender, the post uri as id', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const post = await postAs(acc.user.agent, `@${acc.bot.handle} hello there`);
    await net.processAll();
    const res = await ch.pollNow();
    expect(res.stored).toBe(1);
    const [row, ...more] = rows(db);
    expect(more).toEqual([]);
    expect(row).toMatchObject({
      chat_jid: `bluesky:${acc.user.did}`,
      sender: acc.user.did,
      sender_name: acc.user.handle,
      verb: 'mention',
      // the opening mention of the bot is stripped so commands and prefixes work: `@bot /ping`
      content: 'hello there',
      platform_msg_id: post.uri,
    });
    // the cursor moved, and the server's read marker too
    expect(db.prepare('SELECT value FROM router_state WHERE key = ?').pluck().get(SEEN_KEY)).toBe(res.cursor);
    const list = await acc.bot.agent.app.bsky.notification.listNotifications({ limit: 5 });
    expect(list.data.seenAt).toBe(res.cursor);
  });

  test('the poll loop picks up a mention by itself', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    await startChannel(db, acc, { pollMs: 50 });
    const post = await postAs(acc.user.agent, `@${acc.bot.handle} anyone home?`);
    await net.processAll();
    const row = await until(() => rows(db)[0], 10_000, 'the mention row');
    expect(row.platform_msg_id).toBe(post.uri);
  });

  test('after a restart the same notification is not stored again: cursor first, dedup as backstop', async () => {
    const { db, reopen } = freshDb();
    const acc = await makeAccounts(net);
    const first = await startChannel(db, acc);
    await postAs(acc.user.agent, `@${acc.bot.handle} once only`);
    await net.processAll();
    expect((await first.pollNow()).stored).toBe(1);
    await first.stop();

    // a restart: new process state, same database
    const db2 = reopen();
    const second = await startChannel(db2, acc, { overlapMs: 0 });
    expect(await second.pollNow()).toMatchObject({ seen: 0, stored: 0 });
    expect(rows(db2)).toHaveLength(1);

    // a cursor that lost ground (restored backup): the notification is read again, the dedup keeps one row
    db2.prepare('UPDATE router_state SET value = ? WHERE key = ?').run('2000-01-01T00:00:00.000Z', SEEN_KEY);
    expect(await second.pollNow()).toMatchObject({ seen: 1, stored: 0 });
    expect(rows(db2)).toHaveLength(1);

    // and the cursor alone keeps it out: with the row gone, nothing comes back
    db2.prepare('DELETE FROM messages').run();
    expect(await second.pollNow()).toMatchObject({ seen: 0, stored: 0 });
    expect(rows(db2)).toHaveLength(0);
  });

  test('a reply to the bot becomes verb reply with reply_to the post it answers', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const botPost = await acc.bot.agent.post({ text: 'a post by the bot' });
    const ref = { uri: botPost.uri, cid: botPost.cid };
    // The AppView indexes repos in parallel: a reply indexed before its parent notifies no one.
    await net.processAll();
    const answer = await postAs(acc.user.agent, 'nice one', { root: ref, parent: ref });
    await net.processAll();
    await ch.pollNow();
    expect(rows(db)).toMatchObject([
      { verb: 'reply', content: 'nice one', platform_msg_id: answer.uri, reply_to: botPost.uri },
    ]);
  });

  test('a follow becomes verb follow and a like verb reaction', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const follow = await acc.user.agent.follow(acc.bot.did);
    const botPost = await acc.bot.agent.post({ text: 'like me' });
    const like = await acc.user.agent.like(botPost.uri, botPost.cid);
    await net.processAll();
    expect((await ch.pollNow()).stored).toBe(2);
    expect(rows(db)).toMatchObject([
      { verb: 'follow', chat_jid: `bluesky:${acc.user.did}`, platform_msg_id: follow.uri, reply_to: null },
      {
        verb: 'reaction',
        chat_jid: `bluesky:${acc.user.did}`,
        platform_msg_id: like.uri,
        reply_to: botPost.uri,
      },
    ]);
    expect(rows(db)[0]!.content).toContain('followed you');
  });
});

describe('failures', () => {
  /** A bot that reaches its PDS through a proxy that can fail calls, and a mention to answer. */
  async function viaProxy() {
    const { db, reopen } = freshDb();
    const acc = await makeAccounts(net);
    const proxy = await startFaultProxy(net.pdsUrl);
    proxies.push(proxy);
    const ch = await startChannel(db, acc, { service: proxy.url, requestTimeoutMs: 3000 });
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} ping`);
    await net.processAll();
    const part = firstPart(acc.user, 'pong', mention.uri);
    const sendError = (p = part) =>
      ch.send(p).then(
        () => undefined,
        (e: unknown) => e as DeliveryError,
      );
    return { db, reopen, acc, proxy, ch, part, sendError };
  }

  /** The texts of the bot's posts in its own repo (what the PDS holds, duplicates included), oldest first. */
  async function botPosts(acc: Accounts): Promise<Array<{ uri: string; text: string }>> {
    const res = await acc.bot.agent.com.atproto.repo.listRecords({
      repo: acc.bot.did,
      collection: 'app.bsky.feed.post',
      limit: 100,
      reverse: true,
    });
    return res.data.records.map((r) => ({ uri: r.uri, text: (r.value as { text: string }).text }));
  }

  test('every fault on the post path ends in one post per row: the record key finds a post whose answer was lost', async () => {
    const { db, acc, proxy, ch } = await viaProxy();
    const s = manualSleep(true);
    const d = createDelivery({ db, channels: [ch], log: silentLogger(), pollMs: 0, sleep: s.sleep });
    const jid = `bluesky:${acc.user.did}`;
    const steps: Array<[text: string, fault: Fault, retried: boolean]> = [
      ['after a 502', { status: 502, error: 'UpstreamFailure' }, true],
      ['after a reset', { drop: true }, true],
      ['after a timeout', { hang: true }, true],
      ['after a 429', { status: 429, error: 'RateLimitExceeded', headers: { 'retry-after': '7' } }, true],
      // The PDS stored these; the answer never came back. The lookup under the key finds them at once.
      ['answer lost by a reset', { drop: true, after: true }, false],
      ['answer lost by a timeout', { hang: true, after: true }, false],
    ];
    try {
      d.start();
      for (const [text, fault] of steps) {
        proxy.failNext('com.atproto.repo.createRecord', fault);
        insertOutbound(db, { chat_jid: jid, content: text, kind: 'reply' });
        d.wake(jid);
        await d.idle();
      }
    } finally {
      await d.stop();
    }
    const rows = db
      .prepare(
        `SELECT m.delivery, m.delivery_attempts, p.platform_msg_id FROM messages m
         JOIN outbound_parts p ON p.message_id = m.id WHERE m.is_from_me = 1 ORDER BY m.id`,
      )
      .all() as Array<{ delivery: string; delivery_attempts: number; platform_msg_id: string }>;
    expect(rows.map((r) => [r.delivery, r.delivery_attempts])).toEqual(
      steps.map(([, , retried]) => ['sent', retried ? 1 : 0]),
    );
    const posts = await botPosts(acc);
    expect(posts.map((p) => p.text)).toEqual(steps.map(([text]) => `@${acc.user.handle} ${text}`));
    expect(rows.map((r) => r.platform_msg_id.split('|')[0])).toEqual(posts.map((p) => p.uri));
    expect(s.waits.map((w) => w.ms)).toContain(7000);
  });

  test('a part the PDS accepted but gated never recorded is found after a restart, not posted again', async () => {
    const { db, reopen, acc, ch, part } = await viaProxy();
    const text = Array.from({ length: 40 }, (_, i) => `word${i}`)
      .join(' ')
      .repeat(2);
    const id = insertOutbound(db, {
      chat_jid: part.chatJid,
      content: text,
      kind: 'reply',
      reply_to: part.replyTo,
    });
    // Part 1 reaches the PDS, then gated "dies" before recording it: the error stands for the kill.
    const dying: Channel = {
      platform: ch.platform,
      limit: ch.limit,
      limitUnit: ch.limitUnit,
      start: () => Promise.resolve(),
      stop: () => Promise.resolve(),
      async send(p) {
        const made = await ch.send(p);
        if (p.part === 1) throw new DeliveryError('transient', 'killed before the part was recorded');
        return made;
      },
    };
    const s = manualSleep();
    const first = createDelivery({ db, channels: [dying], log: silentLogger(), pollMs: 0, sleep: s.sleep });
    first.start();
    await s.waitedTimes(1);
    await first.stop();
    expect(db.prepare('SELECT parts_sent FROM messages WHERE id = ?').get(id)).toEqual({ parts_sent: 1 });
    expect(await botPosts(acc)).toHaveLength(2);

    const db2 = reopen();
    const second = createDelivery({ db: db2, channels: [ch], log: silentLogger(), pollMs: 0 });
    second.start();
    await second.idle();
    await second.stop();
    expect(db2.prepare('SELECT delivery, parts_sent FROM messages WHERE id = ?').get(id)).toEqual({
      delivery: 'sent',
      parts_sent: 2,
    });
    const posts = await botPosts(acc);
    expect(posts).toHaveLength(2);
    const parts = db2
      .prepare('SELECT platform_msg_id FROM outbound_parts WHERE message_id = ? ORDER BY part')
      .all(id) as Array<{ platform_msg_id: string }>;
    expect(parts.map((p) => p.platform_msg_id.split('|')[0])).toEqual(posts.map((p) => p.uri));
  });

  test('429 is rate_limited with the wait from ratelimit-reset, and the retry is delivered', async () => {
    const { proxy, ch, part, sendError } = await viaProxy();
    const reset = Math.ceil(Date.now() / 1000) + 30;
    proxy.failNext('com.atproto.repo.createRecord', {
      status: 429,
      error: 'RateLimitExceeded',
      headers: { 'ratelimit-reset': String(reset), 'ratelimit-remaining': '0' },
    });
    const err = await sendError();
    expect(err).toBeInstanceOf(DeliveryError);
    expect(err).toMatchObject({ failure: 'rate_limited', status: 429 });
    expect(err!.retryAfterMs).toBeGreaterThan(25_000);
    expect(err!.retryAfterMs).toBeLessThanOrEqual(31_000);
    expect(await ch.send(part)).toMatch(/^at:\/\/.+\|.+/);
  });

  test('5xx and a dropped connection are transient; 403 and an invalid record are permanent', async () => {
    const { proxy, part, sendError } = await viaProxy();
    proxy.failNext('com.atproto.repo.createRecord', { status: 502, error: 'UpstreamFailure' });
    expect(await sendError()).toMatchObject({ failure: 'transient', status: 502 });
    proxy.failNext('app.bsky.feed.getPosts', { status: 503 });
    expect(await sendError()).toMatchObject({ failure: 'transient', status: 503 });
    proxy.failNext('com.atproto.repo.createRecord', { drop: true });
    expect(await sendError()).toMatchObject({ failure: 'transient' });
    proxy.failNext('com.atproto.repo.createRecord', { status: 403, error: 'Forbidden' });
    expect(await sendError()).toMatchObject({ failure: 'permanent', status: 403 });
    // a real refusal by the PDS: 301 graphemes break the post record's limit
    expect(await sendError({ ...part, text: 'x'.repeat(301) })).toMatchObject({
      failure: 'permanent',
      status: 400,
    });
  });

  test('a session whose tokens are both refused logs in again and the call goes through', async () => {
    const { proxy, ch, acc, db } = await viaProxy();
    const logins = () => proxy.calls.filter((c) => c === 'com.atproto.server.createSession').length;
    expect(logins()).toBe(1);
    proxy.failNext('app.bsky.notification.listNotifications', { status: 401, error: 'InvalidToken' });
    proxy.failNext('com.atproto.server.refreshSession', { status: 400, error: 'ExpiredToken' });
    expect(await ch.pollNow()).toMatchObject({ stored: 1 });
    expect(logins()).toBe(2);
    expect(rows(db)).toMatchObject([{ sender: acc.user.did, verb: 'mention' }]);
  });

  test('a PDS that is down at start does not fail start: the loop logs in once it answers', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const proxy = await startFaultProxy(net.pdsUrl);
    proxies.push(proxy);
    proxy.failNext('com.atproto.server.createSession', { status: 503, times: 2 });
    const ch = await startChannel(db, acc, { service: proxy.url, pollMs: 20 });
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} are you up now?`);
    await net.processAll();
    const row = await until(() => rows(db)[0], 10_000, 'the mention after a late login');
    expect(row.platform_msg_id).toBe(mention.uri);
    expect(proxy.calls.filter((c) => c === 'com.atproto.server.createSession').length).toBe(3);
    expect(ch.did).toBe(acc.bot.did);
  });

  test("the poll loop waits a 429's retry-after before it polls again, then takes the mention", async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const proxy = await startFaultProxy(net.pdsUrl);
    proxies.push(proxy);
    const list = 'app.bsky.notification.listNotifications';
    const polls = () => proxy.calls.filter((c) => c === list).length;
    const pollTimes = () => proxy.callTimes.filter((_, i) => proxy.calls[i] === list);
    proxy.failNext(list, { status: 429, headers: { 'retry-after': '2' } });
    // The first poll belongs to start and is refused; at 20 ms a poll, only the 2 s asked for holds the next.
    // The gap is read from when the proxy saw each poll, so a slow machine cannot make it pass or fail.
    await startChannel(db, acc, { service: proxy.url, pollMs: 20 });
    expect(polls()).toBe(1);
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} after the limit`);
    await net.processAll();
    const row = await until(() => rows(db)[0], 15_000, 'the mention after the wait');
    expect(row.platform_msg_id).toBe(mention.uri);
    const [refused, next] = pollTimes();
    expect(next, 'a poll after the refused one').toBeDefined();
    // Timers may fire a millisecond early by rounding; 2 s less that is still "waited".
    expect(next! - refused!).toBeGreaterThanOrEqual(1_990);
  });

  test('wrong credentials fail start with a reason that names no secret', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = makeChannel(net, db, { ...acc, botPassword: 'aaaa-bbbb-cccc-dddd' });
    const err = (await ch.start(sinkFor(db)).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(Error);
    expect(err.message).not.toContain('aaaa-bbbb-cccc-dddd');
    expect(err.message).toMatch(/password|credential|auth/i);
  });
});
