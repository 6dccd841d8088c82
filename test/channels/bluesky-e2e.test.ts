/**
 * Bluesky end to end with the whole gateway: a user mentions the bot on a real local atproto network, the
 * route `platform=bluesky` sends it to a group, the example agent (process runtime) answers, and the answer
 * is posted as a reply in the user's thread and reaches their notifications. After a restart of gated the
 * same mention is not answered again.
 */
import { until } from '../helpers/process.js';
import { join } from 'node:path';
import { beforeEach, expect, test } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { closeTestGated } from '../helpers/gated.js';
import { makeAccounts, postAs, readPost, type Accounts } from '../infra/atproto/harness.js';
import { useAtprotoNetwork, type AtprotoNetwork } from '../infra/atproto/network.js';
import { startE2eGated } from './e2e.js';
import type { E2eSeed } from './support.js';

const network = useAtprotoNetwork('bsky_endtoend');
let net: AtprotoNetwork;

beforeEach(() => {
  net = network();
});

/** The settings of a gated on the database in `dir`, with the bot's account. */
function envFor(dir: string, acc: Accounts): Record<string, string> {
  return {
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    BLUESKY_SERVICE: net.pdsUrl,
    BLUESKY_IDENTIFIER: acc.bot.handle,
    BLUESKY_APP_PASSWORD: acc.botPassword,
  };
}

/** The whole gateway (startE2eGated) on `env`; `seed` stores the group and route on the first start. */
async function startWith(env: Record<string, string>, seed: E2eSeed = { groups: [], routes: [] }) {
  const gated = await startE2eGated(env, seed);
  expect(gated.channels.map((c) => c.platform)).toContain('bluesky');
  return gated;
}

/** The bot's replies directly under `uri`, as the AppView shows the thread. */
async function botRepliesUnder(acc: Accounts, uri: string): Promise<Array<{ uri: string; text: string }>> {
  await net.processAll();
  const res = await acc.user.agent.getPostThread({ uri, depth: 1 });
  const thread = res.data.thread as {
    replies?: Array<{ post?: { uri: string; author: { did: string }; record: unknown } }>;
  };
  return (thread.replies ?? [])
    .map((r) => r.post)
    .filter((p): p is NonNullable<typeof p> => p?.author.did === acc.bot.did)
    .map((p) => ({ uri: p.uri, text: (p.record as { text: string }).text }));
}

test('a mention is answered by the agent in the thread, and not again after a restart', async () => {
  const acc = await makeAccounts(net);
  const env = envFor(tempDir('gated-bsky-e2e-'), acc);
  const first = await startWith(env, {
    groups: [['bsky/feed', 'Bluesky feed']],
    routes: [[30, 'platform=bluesky', 'bsky/feed']],
  });
  const mention = await postAs(acc.user.agent, `@${acc.bot.handle} hello agent`);
  await net.processAll();
  const [reply] = await until(
    async () => {
      const r = await botRepliesUnder(acc, mention.uri);
      return r.length ? r : undefined;
    },
    30_000,
    'the agent reply in the thread',
  );
  expect(reply!.text).toContain('echo: hello agent');
  expect((await readPost(acc.bot.agent, reply!.uri)).reply).toEqual({ root: mention, parent: mention });
  const notes = await acc.user.agent.app.bsky.notification.listNotifications({ limit: 10 });
  expect(notes.data.notifications.map((n) => [n.reason, n.uri])).toContainEqual(['reply', reply!.uri]);
  await closeTestGated(first);

  // Restart on the same database. A second mention, answered after the restart, proves the restarted
  // gated has polled and worked through everything it stored; the first mention must still have one reply.
  const second = await startWith(env);
  const later = await postAs(acc.user.agent, `@${acc.bot.handle} still there?`);
  await net.processAll();
  await until(
    async () => {
      const r = await botRepliesUnder(acc, later.uri);
      return r.length ? r : undefined;
    },
    30_000,
    'the reply to the second mention',
  );
  expect(await botRepliesUnder(acc, mention.uri)).toHaveLength(1);
  const stored = second.db
    .prepare('SELECT count(*) FROM messages WHERE platform_msg_id = ? AND is_from_me = 0')
    .pluck()
    .get(mention.uri);
  expect(stored).toBe(1);
  const answers = second.db
    .prepare(
      `SELECT count(*) FROM messages o JOIN messages i ON o.reply_to_id = i.id
       WHERE i.platform_msg_id = ? AND o.is_from_me = 1`,
    )
    .pluck()
    .get(mention.uri);
  expect(answers).toBe(1);
  // The channel polls every 5 s (its default, as gated wires it): two mentions, two polls at most each.
}, 60_000);
