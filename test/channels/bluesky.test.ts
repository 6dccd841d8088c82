/**
 * The Bluesky channel against a real local atproto network (PLC, PDS, AppView on PostgreSQL and Redis),
 * driven by the real @atproto/api on both sides: the suite every channel passes, and the threaded replies
 * the channel posts. Notifications stored as inbound rows and the failures: bluesky-inbound.test.ts.
 */
import { until } from '../helpers/process.js';
import { describe, expect, test } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { createDelivery } from '../../delivery/delivery.js';
import { graphemeLength } from '../../core/text.js';
import { insertOutbound } from '../../store/messages.js';
import { silentLogger } from '../../core/log.js';
import { freshDb } from '../helpers/db.js';
import { makeAccounts, firstPart, postAs, readPost } from '../infra/atproto/harness.js';
import { blueskyHarness } from '../infra/atproto/conformance-harness.js';
import { channelConformance } from './conformance.js';
import { net, rows, startChannel, useBlueskyNetwork } from './bluesky-support.js';

const network = useBlueskyNetwork('bsky_channel');

// The suite every channel passes, on the real network (redelivery = a cursor behind the last event).
channelConformance('bluesky', () => blueskyHarness(network()), {
  redelivery: true,
  faults: ['rate_limited', 'server_error', 'forbidden'],
  drafts: false,
});

describe('outbound posts', () => {
  test('a reply is posted under the mention, with facets, and reaches the user as a reply notification', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} what is new?`);
    await net.processAll();
    await ch.pollNow();
    const id = await ch.send(
      firstPart(acc.user, `all good @${acc.user.handle}, see https://example.com/news`, mention.uri),
    );
    const [uri, cid] = id!.split('|');
    expect(cid).toBeTruthy();
    const record = await readPost(acc.bot.agent, uri!);
    expect(record.reply).toEqual({ root: mention, parent: mention });
    const features = record.facets!.flatMap((f) => f.features);
    expect(features).toContainEqual({ $type: 'app.bsky.richtext.facet#mention', did: acc.user.did });
    expect(features).toContainEqual({
      $type: 'app.bsky.richtext.facet#link',
      uri: 'https://example.com/news',
    });
    await net.processAll();
    const notes = await acc.user.agent.app.bsky.notification.listNotifications({ limit: 10 });
    // the AppView files a reply that also mentions the user under `mention`
    expect(notes.data.notifications.map((n) => [n.reason, n.uri])).toEqual([['mention', uri]]);
  });

  test('a mention deep in a thread is answered under it, with the thread root as root', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const root = await postAs(acc.user.agent, 'a thread about nothing');
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} thoughts?`, { root, parent: root });
    await net.processAll();
    await ch.pollNow();
    expect(rows(db)[0]).toMatchObject({ verb: 'mention', reply_to: root.uri });
    const id = await ch.send(firstPart(acc.user, 'none', mention.uri));
    expect((await readPost(acc.bot.agent, id!.split('|')[0]!)).reply).toEqual({ root, parent: mention });
  });

  test('a 700-grapheme reply becomes a chain of 3 posts, each under the previous, even across a restart', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} tell me a long story`);
    await net.processAll();
    // 700 graphemes, many of them several UTF-16 units: a family emoji counts once
    const text = Array.from({ length: 700 }, (_, i) => (i % 7 === 0 ? '👨‍👩‍👧' : 'ab'[i % 2]!)).join('');
    const seg = [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(text)].map(
      (s) => s.segment,
    );
    expect(seg).toHaveLength(700);
    const parts = [seg.slice(0, 300), seg.slice(300, 600), seg.slice(600)].map((p) => p.join(''));
    const base = {
      messageId: 7,
      chatJid: `bluesky:${acc.user.did}`,
      replyTo: mention.uri,
      topic: '',
      parts: 3,
    };
    const id0 = await ch.send({ ...base, part: 0, text: parts[0]!, previousPartId: null });
    const id1 = await ch.send({ ...base, part: 1, text: parts[1]!, previousPartId: id0 });
    await ch.stop();
    // a fresh channel (empty root cache) resumes the chain: the root comes from the bot's own repo
    const again = await startChannel(db, acc);
    const id2 = await again.send({ ...base, part: 2, text: parts[2]!, previousPartId: id1 });
    const ids = [id0, id1, id2].map((id) => ({ uri: id!.split('|')[0]!, cid: id!.split('|')[1]! }));
    const records = await Promise.all(ids.map((r) => readPost(acc.bot.agent, r.uri)));
    expect(records.map((r) => r.text).join('')).toBe(text);
    expect(records.map((r) => r.reply)).toEqual([
      { root: mention, parent: mention },
      { root: mention, parent: ids[0] },
      { root: mention, parent: ids[1] },
    ]);
  });

  test('through the delivery worker, a 700-grapheme reply row is posted as a chain of 3 replies', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const mention = await postAs(acc.user.agent, `@${acc.bot.handle} and then?`);
    await net.processAll();
    const words = Array.from({ length: 150 }, (_, i) => (i % 5 === 0 ? 'né🙂' : 'word') + String(i % 10));
    const all = [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(words.join(' '))];
    const text = all
      .slice(0, 700)
      .map((g) => g.segment)
      .join('')
      .replace(/ $/, 'x');
    expect(graphemeLength(text)).toBe(700);
    const id = insertOutbound(db, {
      chat_jid: `bluesky:${acc.user.did}`,
      content: text,
      kind: 'reply',
      reply_to: mention.uri,
    });
    const delivery = createDelivery({ db, channels: [ch], log: silentLogger(), pollMs: 0 });
    delivery.start();
    try {
      await until(
        () => db.prepare("SELECT 1 FROM messages WHERE id = ? AND delivery = 'sent'").pluck().get(id),
        10_000,
        'delivery',
      );
    } finally {
      await delivery.stop();
    }
    const parts = db
      .prepare('SELECT platform_msg_id FROM outbound_parts WHERE message_id = ? ORDER BY part')
      .pluck()
      .all(id) as string[];
    expect(parts).toHaveLength(3);
    const refs = parts.map((p) => ({ uri: p.split('|')[0]!, cid: p.split('|')[1]! }));
    const records = await Promise.all(refs.map((r) => readPost(acc.bot.agent, r.uri)));
    expect(records.map((r) => r.reply)).toEqual([
      { root: mention, parent: mention },
      { root: mention, parent: refs[0] },
      { root: mention, parent: refs[1] },
    ]);
    for (const r of records) expect(graphemeLength(r.text)).toBeLessThanOrEqual(300);
    expect(
      records
        .map((r) => r.text)
        .join(' ')
        .replace(/\s+/g, ' '),
    ).toBe(text.replace(/\s+/g, ' '));
  });

  test('a message with no post to answer becomes a new post that mentions the user', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const id = await ch.send(firstPart(acc.user, 'thanks for the follow'));
    const record = await readPost(acc.bot.agent, id!.split('|')[0]!);
    expect(record.text).toBe(`@${acc.user.handle} thanks for the follow`);
    expect(record.reply).toBeUndefined();
    await net.processAll();
    const notes = await acc.user.agent.app.bsky.notification.listNotifications({ limit: 5 });
    expect(notes.data.notifications.map((n) => n.reason)).toEqual(['mention']);
  });

  test('a chat that is not bluesky:<did> is refused as permanent', async () => {
    const { db } = freshDb();
    const acc = await makeAccounts(net);
    const ch = await startChannel(db, acc);
    const err = await ch
      .send({ ...firstPart(acc.user, 'x'), chatJid: 'bluesky:alice' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeliveryError);
    expect(err).toMatchObject({ failure: 'permanent' });
  });
});
