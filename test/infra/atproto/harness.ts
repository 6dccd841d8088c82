/**
 * Shared set-up of the Bluesky tests: one real local atproto network per test file, a fresh bot account
 * and user per test (so notifications never leak between tests), and the channel under test on a fresh
 * SQLite database.
 */
import { RichText, type AtpAgent } from '@atproto/api';
import { silentLogger } from '../../../core/log.js';
import {
  createBlueskyChannel,
  type BlueskyChannel,
  type BlueskyChannelOptions,
} from '../../../channels/bluesky/index.js';
import type { SendPart } from '../../../channels/channel.js';
import type { Db } from '../../../store/db.js';
import { insertInbound } from '../../../store/messages.js';
import type { AtprotoNetwork, TestUser } from './network.js';

let seq = 0;

/** A bot account with an app password, and a user who talks to it. */
export interface Accounts {
  bot: TestUser;
  botPassword: string;
  user: TestUser;
}

/** Creates a fresh bot and user on the network. Handles are unique per test file run. */
export async function makeAccounts(net: AtprotoNetwork): Promise<Accounts> {
  seq += 1;
  const tag = `${process.pid.toString(36)}${seq}`;
  const bot = await net.createUser(`gbot${tag}.test`);
  const user = await net.createUser(`user${tag}.test`);
  return { bot, botPassword: await net.appPassword(bot), user };
}

/** The channel under test, logged in as the bot with its app password, storing into `db`. */
export function makeChannel(
  net: AtprotoNetwork,
  db: Db,
  acc: Accounts,
  extra: Partial<BlueskyChannelOptions> = {},
): BlueskyChannel {
  return createBlueskyChannel({
    db,
    service: net.pdsUrl,
    identifier: acc.bot.handle,
    password: acc.botPassword,
    log: silentLogger(),
    // Tests poll with pollNow(); the timer loop is exercised on its own.
    pollMs: 3_600_000,
    ...extra,
  });
}

/** The sink a gateway would pass: the real inbound writer. */
export function sinkFor(db: Db) {
  return (msg: Parameters<typeof insertInbound>[1]) => insertInbound(db, msg);
}

/** Posts as `agent`, with mention and link facets resolved the way a Bluesky client does. */
export async function postAs(
  agent: AtpAgent,
  text: string,
  reply?: { root: { uri: string; cid: string }; parent: { uri: string; cid: string } },
): Promise<{ uri: string; cid: string }> {
  const rt = new RichText({ text });
  await rt.detectFacets(agent);
  const made = await agent.post({ text: rt.text, facets: rt.facets, ...(reply ? { reply } : {}) });
  return { uri: made.uri, cid: made.cid };
}

/** Reads a post record from its author's repo. */
export async function readPost(agent: AtpAgent, uri: string) {
  const [, , repo, collection, rkey] = uri.split('/');
  const res = await agent.com.atproto.repo.getRecord({ repo: repo!, collection: collection!, rkey: rkey! });
  return res.data.value as {
    text: string;
    facets?: Array<{ features: Array<{ $type: string; did?: string; uri?: string }> }>;
    reply?: { root: { uri: string; cid: string }; parent: { uri: string; cid: string } };
  };
}

/** The first (or only) part of a reply to `user`, answering `replyTo` when given. */
export function firstPart(user: TestUser, text: string, replyTo: string | null = null): SendPart {
  return {
    messageId: 1,
    chatJid: `bluesky:${user.did}`,
    text,
    part: 0,
    parts: 1,
    replyTo,
    topic: '',
    previousPartId: null,
  };
}
