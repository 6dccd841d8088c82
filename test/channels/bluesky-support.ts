/**
 * What the Bluesky channel's files share (bluesky.test.ts, bluesky-inbound.test.ts: two files so their
 * halves run at once, each on its own real local atproto network): the network of the file, the channels a
 * test started and the fault proxies it made, stopped after each test.
 */
import { afterEach, beforeEach } from 'vitest';
import type { Message } from '../../core/types.js';
import type { BlueskyChannel } from '../../channels/bluesky/index.js';
import type { Db } from '../../store/db.js';
import { makeChannel, sinkFor, type Accounts } from '../infra/atproto/harness.js';
import { useAtprotoNetwork, type AtprotoNetwork } from '../infra/atproto/network.js';
import type { FaultProxy } from '../infra/atproto/fault-proxy.js';

/** The network of the running test's file (set before each test by useBlueskyNetwork). */
export let net: AtprotoNetwork;
const started: BlueskyChannel[] = [];
/** Fault proxies a test made: closed after it. */
export const proxies: FaultProxy[] = [];

/** One network for the calling file (AppView schema `schema`), and the clean-up after each test. */
export function useBlueskyNetwork(schema: string): () => AtprotoNetwork {
  const network = useAtprotoNetwork(schema);
  beforeEach(() => {
    net = network();
  });
  afterEach(async () => {
    while (started.length) await started.pop()!.stop();
    while (proxies.length) await proxies.pop()!.close();
  });
  return network;
}

/** The channel of the bot in `acc`, started, storing into `db`; stopped after the test. */
export async function startChannel(db: Db, acc: Accounts, extra: Parameters<typeof makeChannel>[3] = {}) {
  const ch = makeChannel(net, db, acc, extra);
  started.push(ch);
  await ch.start(sinkFor(db));
  return ch;
}

/** The inbound rows, oldest first. */
export function rows(db: Db): Message[] {
  return db.prepare('SELECT * FROM messages WHERE is_from_me = 0 ORDER BY id').all() as Message[];
}
