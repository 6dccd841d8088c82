/**
 * The Bluesky side of the shared channel conformance suite (test/channels/conformance.ts): a fresh bot and
 * user on the real local network per test, the bot's channel reaching its PDS through the fault proxy,
 * which also records every post the PDS accepted from the bot.
 */
import { silentLogger } from '../../../core/log.js';
import { SEEN_KEY, createBlueskyChannel } from '../../../channels/bluesky/index.js';
import type { Db } from '../../../store/db.js';
import type { ChannelHarness, ConformanceFault } from '../../channels/conformance.js';
import { startFaultProxy, type Fault } from './fault-proxy.js';
import { makeAccounts, postAs } from './harness.js';
import type { AtprotoNetwork } from './network.js';

/** What the rate-limit fault announces (retry-after, in seconds, on the 429). */
const RETRY_AFTER_MS = 2000;

const FAULTS: Record<ConformanceFault, Fault> = {
  rate_limited: {
    status: 429,
    error: 'RateLimitExceeded',
    headers: { 'retry-after': String(RETRY_AFTER_MS / 1000), 'ratelimit-remaining': '0' },
  },
  server_error: { status: 502, error: 'UpstreamFailure' },
  forbidden: { status: 403, error: 'Forbidden' },
};

interface PostInput {
  repo?: string;
  collection?: string;
  record?: { text?: string; reply?: { parent?: { uri?: string } } };
}

/** Makes a harness on `net` (one per test: accounts and proxy are new each time). */
export async function blueskyHarness(net: AtprotoNetwork): Promise<ChannelHarness> {
  const acc = await makeAccounts(net);
  const proxy = await startFaultProxy(net.pdsUrl);
  let lastDb: Db | undefined;
  let lastIndexedAt: string | undefined;
  // A post that answers nothing opens with a mention of the user, so it reaches them: that is addressing,
  // not part of the message the suite compares.
  const addressing = `@${acc.user.handle} `;

  return {
    jid: `bluesky:${acc.user.did}`,
    retryAfterMs: RETRY_AFTER_MS,
    makeChannel(db) {
      lastDb = db;
      return createBlueskyChannel({
        db,
        service: proxy.url,
        identifier: acc.bot.handle,
        password: acc.botPassword,
        log: silentLogger(),
        pollMs: 50,
      });
    },
    async inject(text) {
      const post = await postAs(acc.user.agent, `@${acc.bot.handle} ${text}`);
      await net.processAll();
      const list = await acc.bot.agent.app.bsky.notification.listNotifications({ limit: 5, priority: false });
      lastIndexedAt = list.data.notifications.find((n) => n.uri === post.uri)?.indexedAt;
      return { sender: acc.user.did, verb: 'mention', platform_msg_id: post.uri, content: text };
    },
    // Bluesky redelivers through its cursor: a cursor behind the last event (a crash between storing and
    // moving it, a restored backup) makes the next poll hand the same notification over again.
    async redeliverLast() {
      if (!lastDb || !lastIndexedAt) throw new Error('redeliverLast: nothing injected yet');
      const before = new Date(Date.parse(lastIndexedAt) - 1).toISOString();
      lastDb.prepare('UPDATE router_state SET value = ? WHERE key = ?').run(before, SEEN_KEY);
    },
    received() {
      return proxy.accepted
        .filter((a) => a.nsid === 'com.atproto.repo.createRecord')
        .map((a) => a.input as PostInput)
        .filter((p) => p.collection === 'app.bsky.feed.post' && p.repo === acc.bot.did)
        .map((p) => {
          const text = p.record?.text ?? '';
          return {
            text: text.startsWith(addressing) ? text.slice(addressing.length) : text,
            replyTo: p.record?.reply?.parent?.uri ?? null,
          };
        });
    },
    failNext(fault, n) {
      proxy.failNext('com.atproto.repo.createRecord', { ...FAULTS[fault], times: n });
    },
    close: () => proxy.close(),
  };
}
