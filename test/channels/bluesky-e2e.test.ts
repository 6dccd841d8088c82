/**
 * Bluesky end to end with the whole gateway: a user mentions the bot on a real local atproto network, the
 * route `platform=bluesky` sends it to a group, the example agent (process runtime) answers, and the answer
 * is posted as a reply in the user's thread and reaches their notifications. After a restart of gated the
 * same mention is not answered again.
 */
import { until } from '../helpers/process.js';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { loadConfig, type Config } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { makeAccounts, postAs, readPost, type Accounts } from '../infra/atproto/harness.js';
import { useAtprotoNetwork, type AtprotoNetwork } from '../infra/atproto/network.js';

const network = useAtprotoNetwork('bsky_endtoend');
let net: AtprotoNetwork;
const running: Gated[] = [];

beforeEach(() => {
  net = network();
});
afterEach(async () => {
  while (running.length) await running.pop()!.close(2000);
});

function configFor(dir: string, acc: Accounts): Config {
  return loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_POLL_MS: '50',
    GATED_RUNTIME: 'process',
    GATED_IDLE_TIMEOUT_MS: '300',
    BLUESKY_SERVICE: net.pdsUrl,
    BLUESKY_IDENTIFIER: acc.bot.handle,
    BLUESKY_APP_PASSWORD: acc.botPassword,
  });
}

async function startWith(config: Config): Promise<Gated> {
  const gated = await startGated({ config, log: silentLogger(), http: false });
  running.push(gated);
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
  const dir = tempDir('gated-bsky-e2e-');
  const acc = await makeAccounts(net);
  const config = configFor(dir, acc);
  const setup = openDatabase(config.db);
  addGroup(setup, config.groupsDir, 'bsky/feed', 'Bluesky feed');
  setup.prepare(`INSERT INTO routes (seq, match, target) VALUES (30, 'platform=bluesky', 'bsky/feed')`).run();
  setup.close();

  const first = await startWith(config);
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
  await first.close(2000);
  running.pop();

  // Restart on the same database. A second mention, answered after the restart, proves the restarted
  // gated has polled and worked through everything it stored; the first mention must still have one reply.
  const second = await startWith(config);
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
