/** The pure parts of the Bluesky channel: notification mapping, ids, error sorting, poll pacing. */
import { XRPCError } from '@atproto/api';
import { describe, expect, test } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { pollDelayAfter, retryAfterMs, toDeliveryError } from '../../channels/bluesky/errors.js';
import { stripLeadingMention, toInbound, type Notification } from '../../channels/bluesky/map.js';
import { decodeRef, didOfJid, encodeRef, isPostUri } from '../../channels/bluesky/refs.js';

const BOT = 'did:plc:bot';
const utf8 = (s: string) => new TextEncoder().encode(s).length;

function notif(
  reason: string,
  record: Record<string, unknown>,
  extra: Partial<Notification> = {},
): Notification {
  return {
    uri: `at://did:plc:ann/app.bsky.feed.post/3k${reason}`,
    cid: 'bafy',
    author: { did: 'did:plc:ann', handle: 'ann.test', displayName: 'Ann' },
    reason,
    record,
    isRead: false,
    indexedAt: '2026-01-02T03:04:05.678Z',
    ...extra,
  } as Notification;
}

function mentionFacet(text: string, handle: string, did: string) {
  const start = utf8(text.slice(0, text.indexOf(handle)));
  return {
    index: { byteStart: start, byteEnd: start + utf8(handle) },
    features: [{ $type: 'app.bsky.richtext.facet#mention', did }],
  };
}

describe('notification → inbound row', () => {
  test('an opening mention of the bot is stripped by its byte range, even after multi-byte text', () => {
    const text = '  @bøt.test /ping ✓';
    expect(stripLeadingMention(text, [mentionFacet(text, '@bøt.test', BOT)], BOT)).toBe('/ping ✓');
  });

  test('a mention of someone else, or of the bot mid-text, stays', () => {
    const other = '@ann.test hi';
    expect(stripLeadingMention(other, [mentionFacet(other, '@ann.test', 'did:plc:ann')], BOT)).toBe(other);
    const mid = 'hi @bot.test';
    expect(stripLeadingMention(mid, [mentionFacet(mid, '@bot.test', BOT)], BOT)).toBe(mid);
  });

  test('each reason becomes its verb; the chat is the author; quotes point at the quoted post', () => {
    const quoted = 'at://did:plc:bot/app.bsky.feed.post/q';
    const quote = toInbound(
      notif('quote', {
        text: 'look',
        embed: { $type: 'app.bsky.embed.record', record: { uri: quoted, cid: 'c' } },
      }),
      BOT,
    );
    expect(quote).toMatchObject({
      chat_jid: 'bluesky:did:plc:ann',
      sender: 'did:plc:ann',
      sender_name: 'Ann',
      verb: 'quote',
      content: 'look',
      reply_to: quoted,
      timestamp: '2026-01-02T03:04:05.678Z',
    });
    const withMedia = toInbound(
      notif('quote', { text: 'pic', embed: { record: { record: { uri: quoted } } } }),
      BOT,
    );
    expect(withMedia?.reply_to).toBe(quoted);
    expect(toInbound(notif('follow', {}), BOT)).toMatchObject({
      verb: 'follow',
      content: '@ann.test followed you',
    });
    expect(toInbound(notif('like', {}, { reasonSubject: quoted }), BOT)).toMatchObject({
      verb: 'reaction',
      reply_to: quoted,
    });
  });

  test('reasons gated does not store, and the bot itself, give no row', () => {
    expect(toInbound(notif('repost', {}), BOT)).toBeNull();
    expect(toInbound(notif('starterpack-joined', {}), BOT)).toBeNull();
    const own = notif('mention', { text: 'hi' });
    own.author = { ...own.author, did: BOT };
    expect(toInbound(own, BOT)).toBeNull();
  });
});

describe('ids', () => {
  test('jids and part ids round-trip; only post uris can be replied under', () => {
    expect(didOfJid('bluesky:did:plc:ann')).toBe('did:plc:ann');
    expect(didOfJid('bluesky:ann')).toBeNull();
    expect(didOfJid('telegram:1')).toBeNull();
    const ref = { uri: 'at://did:plc:a/app.bsky.feed.post/1', cid: 'bafy' };
    expect(decodeRef(encodeRef(ref))).toEqual(ref);
    expect(decodeRef(ref.uri)).toEqual({ uri: ref.uri, cid: undefined });
    expect(isPostUri(ref.uri)).toBe(true);
    expect(isPostUri('at://did:plc:a/app.bsky.graph.follow/1')).toBe(false);
  });
});

describe('errors and pacing', () => {
  const now = 1_700_000_000_000;

  test('429 waits retry-after, else until ratelimit-reset (epoch seconds), never less than a second', () => {
    expect(retryAfterMs({ 'ratelimit-reset': String(now / 1000 + 42) }, now)).toBe(42_000);
    expect(retryAfterMs({ 'ratelimit-reset': String(now / 1000 - 5) }, now)).toBe(1000);
    expect(retryAfterMs({ 'retry-after': '7' }, now)).toBe(7000);
    // relative beats absolute: it does not depend on the clocks agreeing
    expect(retryAfterMs({ 'retry-after': '3', 'ratelimit-reset': String(now / 1000 + 42) }, now)).toBe(3000);
    expect(retryAfterMs(undefined, now)).toBe(60_000);
  });

  test('statuses sort into rate_limited, transient and permanent', () => {
    const x = (status: number, error = '') => toDeliveryError(new XRPCError(status, error, 'm'), now);
    expect(x(429)).toMatchObject({ failure: 'rate_limited', status: 429 });
    for (const s of [500, 502, 503, 504, 1]) expect(x(s).failure).toBe('transient');
    for (const s of [400, 401, 403, 404, 413]) expect(x(s).failure).toBe('permanent');
    expect(toDeliveryError(new TypeError('fetch failed')).failure).toBe('transient');
    const own = new DeliveryError('permanent', 'gone');
    expect(toDeliveryError(own)).toBe(own);
  });

  test('a failed poll waits for the rate limit, or backs off exponentially up to the cap', () => {
    const transient = new DeliveryError('transient', 'x');
    expect(pollDelayAfter(new DeliveryError('rate_limited', 'x', 9000), 1, 5000, 300_000)).toBe(9000);
    expect([1, 2, 3, 10].map((n) => pollDelayAfter(transient, n, 5000, 60_000))).toEqual([
      10_000, 20_000, 40_000, 60_000,
    ]);
  });
});
