/**
 * Bluesky files end to end on a real local atproto network, with the whole gateway (startE2eGated, process
 * runtime): an image a user posts while mentioning the bot is fetched with getBlob into the routed group's
 * folder and the agent reads it there; an image the agent names is uploaded as a blob and posted as an image
 * embed threaded under the text reply. Bluesky has no edits: partial blocks post nothing, even when the
 * setting asks to stream it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RichText } from '@atproto/api';
import { beforeEach, expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { FILES_AGENT_CMD } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { makeAccounts, postAs, type Accounts } from '../infra/atproto/harness.js';
import { useAtprotoNetwork, type AtprotoNetwork } from '../infra/atproto/network.js';
import { startE2eGated } from './e2e.js';
import { groupDirOf } from '../../core/group-dir.js';

const network = useAtprotoNetwork('bsky_files');
const GROUP = 'bsky/files';
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
);

let net: AtprotoNetwork;

beforeEach(() => {
  net = network();
});

/** The whole gateway (startE2eGated) with the bot's account, the files agent and a route to the group. */
function start(acc: Accounts): Promise<Gated> {
  return startE2eGated(
    {
      GATED_AGENT_CMD: FILES_AGENT_CMD,
      // Bluesky asked to stream: it has no edits, so it stays batch.
      GATED_STREAM_CHANNELS: 'bluesky,telegram',
      BLUESKY_SERVICE: net.pdsUrl,
      BLUESKY_IDENTIFIER: acc.bot.handle,
      BLUESKY_APP_PASSWORD: acc.botPassword,
      BLUESKY_POLL_MS: '200',
    },
    { groups: [[GROUP, 'Bluesky files']], routes: [[0, 'platform=bluesky', GROUP]] },
  );
}

interface BotPost {
  uri: string;
  text: string;
  parent: string | undefined;
  images: Array<{ cid: string; mimeType: string; alt: string }>;
}

/** Every post in the bot's repository, read back from its PDS. */
async function botPosts(acc: Accounts): Promise<BotPost[]> {
  const res = await acc.user.agent.com.atproto.repo.listRecords({
    repo: acc.bot.did,
    collection: 'app.bsky.feed.post',
    limit: 100,
  });
  return res.data.records.map((r) => {
    const v = r.value as {
      text: string;
      reply?: { parent: { uri: string } };
      embed?: {
        $type: string;
        images?: Array<{ alt: string; image: { ref: { toString(): string }; mimeType: string } }>;
      };
    };
    return {
      uri: r.uri,
      text: v.text,
      parent: v.reply?.parent.uri,
      images:
        v.embed?.$type === 'app.bsky.embed.images'
          ? (v.embed.images ?? []).map((i) => ({
              cid: i.image.ref.toString(),
              mimeType: i.image.mimeType,
              alt: i.alt,
            }))
          : [],
    };
  });
}

/** Waits for the bot's posts replying to `uri`. */
async function repliesTo(acc: Accounts, uri: string, n = 1): Promise<BotPost[]> {
  return until(
    async () => {
      const r = (await botPosts(acc)).filter((p) => p.parent === uri);
      return r.length >= n ? r : undefined;
    },
    30_000,
    `${n} bot replies to ${uri}`,
  );
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 12);

test('an image posted with a mention reaches the agent as a file in its folder', async () => {
  const acc = await makeAccounts(net);
  const g = await start(acc);
  const blob = await acc.user.agent.uploadBlob(PNG, { encoding: 'image/png' });
  const rt = new RichText({ text: `@${acc.bot.handle} look at this` });
  await rt.detectFacets(acc.user.agent);
  const post = await acc.user.agent.post({
    text: rt.text,
    facets: rt.facets,
    embed: { $type: 'app.bsky.embed.images', images: [{ alt: 'a tiny square', image: blob.data.blob }] },
  });
  await net.processAll();
  const [reply] = await repliesTo(acc, post.uri);
  const row = g.db
    .prepare(`SELECT id FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`)
    .get(post.uri) as { id: number };
  const path = `inbox/${row.id}/0-image-1.png`;
  expect(reply!.text).toBe(`saw image-1.png ${PNG.length} ${sha(PNG)} at ${path}`);
  expect(readFileSync(join(groupDirOf(g.config.groupsDir, GROUP), path))).toEqual(PNG);
  // What the agent was given (it logs each input line in its folder).
  const input = JSON.parse(
    readFileSync(join(groupDirOf(g.config.groupsDir, GROUP), 'inputs.jsonl'), 'utf8'),
  ) as {
    messages: Array<{ content: string; attachments: unknown[] }>;
  };
  expect(input.messages).toEqual([
    expect.objectContaining({
      content: 'look at this',
      attachments: [{ path, mime: 'image/png', size: PNG.length, name: 'image-1.png' }],
    }),
  ]);
  expect(g.db.prepare(`SELECT kind, mime, size, state FROM attachments`).get()).toEqual({
    kind: 'image',
    mime: 'image/png',
    size: PNG.length,
    state: 'saved',
  });
}, 60_000);

test('an image the agent names arrives as an image embed under its text reply', async () => {
  const acc = await makeAccounts(net);
  const g = await start(acc);
  const mention = await postAs(acc.user.agent, `@${acc.bot.handle} send chart.png`);
  await net.processAll();
  const [text] = await repliesTo(acc, mention.uri);
  expect(text).toMatchObject({ text: 'here is chart.png', images: [] });
  const [image] = await repliesTo(acc, text!.uri);
  expect(image).toMatchObject({ text: '', images: [{ mimeType: 'image/png', alt: 'chart.png' }] });
  const blob = await acc.user.agent.com.atproto.sync.getBlob({
    did: acc.bot.did,
    cid: image!.images[0]!.cid,
  });
  const sent = readFileSync(join(groupDirOf(g.config.groupsDir, GROUP), 'out/chart.png'));
  expect(Buffer.from(blob.data)).toEqual(sent);
  await g.delivery.idle();
  // Each part is recorded with its post (`uri|cid`): text part 0, image part 1.
  const parts = g.db.prepare(`SELECT platform_msg_id FROM outbound_parts ORDER BY part`).pluck().all();
  expect(parts.map((id) => String(id).split('|')[0])).toEqual([text!.uri, image!.uri]);
}, 60_000);

test('partial blocks post nothing on Bluesky: only the final answer appears', async () => {
  const acc = await makeAccounts(net);
  const g = await start(acc);
  const mention = await postAs(acc.user.agent, `@${acc.bot.handle} stream 3`);
  await net.processAll();
  await repliesTo(acc, mention.uri);
  await g.delivery.idle();
  const posts = await botPosts(acc);
  expect(posts.map((p) => p.text)).toEqual(['final: word1 word2 word3 done']);
  expect(g.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
}, 60_000);
