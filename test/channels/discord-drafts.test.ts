/**
 * Streaming drafts on Discord end to end: the whole gateway with real discord.js against the local Discord
 * REST + gateway server. An agent's partial blocks become one message edited in place (PATCH); the answer
 * takes it over, so the final text is shown once, or, when it needs more than one message, the draft is
 * deleted and the parts are sent. After a kill -9 between a draft and the answer, the restarted gateway
 * still ends with one final text and no stale draft.
 */
import Database from 'better-sqlite3';
import { afterEach, expect, test } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { silentLogger } from '../../core/log.js';
import { DiscordChannel } from '../../channels/discord/index.js';
import type { Gated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { closedAfterGateds, FILES_AGENT_CMD } from '../helpers/gated.js';
import { exited, spawnGated, until } from '../helpers/process.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { startE2eGated } from './e2e.js';
import { e2eConfig, type E2eSeed } from './support.js';

const ada = { id: '700000000000000042', username: 'ada', global_name: 'Ada' };

let api: DiscordApiServer | undefined;
let gated: Gated | undefined;
let channel: DiscordChannel | undefined;

// The channel of its own stops before the local server closes (after this, with the gateds).
afterEach(async () => {
  await channel?.stop();
  channel = undefined;
});

const SEED: E2eSeed = { groups: [['dc/stream', 'Stream']], routes: [[0, 'platform=discord', 'dc/stream']] };

/** The settings of these tests for the local Discord server, with `env` over them. */
function settings(server: DiscordApiServer, env: Record<string, string> = {}): Record<string, string> {
  return {
    DISCORD_BOT_TOKEN: server.token,
    DISCORD_API_ROOT: server.apiRoot,
    GATED_AGENT_CMD: FILES_AGENT_CMD,
    GATED_IDLE_TIMEOUT_MS: '2000',
    ...env,
  };
}

/** A local Discord server and the whole gateway in this process (startE2eGated), once it identified. */
async function start(env: Record<string, string> = {}): Promise<{ api: DiscordApiServer; gated: Gated }> {
  api = closedAfterGateds(await DiscordApiServer.start());
  gated = await startE2eGated(settings(api, env), SEED);
  await api.waitForIdentify();
  return { api, gated };
}

const say = (server: DiscordApiServer, content: string) =>
  server.push({ channelId: server.textChannelId, author: ada, content });

test('a streamed turn edits one draft at least 3 times and ends as exactly one final text', async () => {
  const { api, gated } = await start();
  const msg = say(api, 'stream 4');
  const final = 'final: word1 word2 word3 word4 done';
  await api.waitFor(() => api.edits.some((e) => e.content === final));
  await gated.delivery.idle();
  // One message in the channel: the draft, posted once as a reply (pinging only the user answered) and
  // edited into the answer.
  expect(api.shown(api.textChannelId).map((m) => m.content)).toEqual([final]);
  expect(api.posted).toHaveLength(1);
  expect(api.posted[0]!).toMatchObject({
    content: 'word1',
    message_reference: { message_id: msg.id },
    allowed_mentions: { parse: [], replied_user: true },
  });
  const drafts = api.edits.filter((e) => e.content !== final);
  expect(drafts.length).toBeGreaterThanOrEqual(3);
  expect(drafts.map((e) => e.content)).toEqual([
    'word1 word2',
    'word1 word2 word3',
    'word1 word2 word3 word4',
  ]);
  expect(api.edits.at(-1)).toMatchObject({ content: final, allowed_mentions: { parse: ['users'] } });
  expect(api.deleted).toEqual([]);
  // Drafts are never stored as replies; the answer is one row, delivered as the edited draft.
  const rows = gated.db.prepare(`SELECT content, delivery FROM messages WHERE is_from_me = 1`).all();
  expect(rows).toEqual([{ content: final, delivery: 'sent' }]);
  const part = gated.db.prepare(`SELECT part, platform_msg_id FROM outbound_parts`).all();
  expect(part).toEqual([{ part: 0, platform_msg_id: api.posted[0]!.id }]);
  expect(gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
});

test('an answer longer than one message deletes the draft and is sent as its parts', async () => {
  const { api, gated } = await start();
  say(api, 'stream 2 +1200');
  await until(
    () => gated.db.prepare(`SELECT delivery FROM messages WHERE is_from_me = 1`).pluck().get() === 'sent',
  );
  const [draft, ...parts] = api.posted;
  expect(draft!.content).toBe('word1');
  expect(api.deleted).toEqual([draft!.id]);
  const shown = api.shown(api.textChannelId);
  expect(shown.map((m) => m.id)).toEqual(parts.map((p) => p.id));
  expect(shown).toHaveLength(2);
  expect(shown.map((m) => m.content).join(' ')).toBe(`final: word1 word2 done${' x'.repeat(1200)}`);
  expect(gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
});

test('in batch mode the same turn shows no draft: only the answer', async () => {
  const { api } = await start({ GATED_STREAM_CHANNELS: 'telegram' });
  say(api, 'stream 3');
  const [sent] = await api.waitForPosted(1);
  expect(sent!.content).toBe('final: word1 word2 word3 done');
  expect(api.edits).toEqual([]);
  expect(api.posted).toHaveLength(1);
});

test('draft operations: removing a message already gone succeeds; editing one is a permanent failure', async () => {
  api = closedAfterGateds(await DiscordApiServer.start());
  channel = new DiscordChannel({ token: api.token, apiRoot: api.apiRoot, log: silentLogger() });
  const jid = `discord:${api.textChannelId}`;
  const id = await channel.drafts.open(jid, 'draft');
  await channel.drafts.edit(jid, id, 'draft', false); // an edit that changes nothing succeeds
  await channel.drafts.remove(jid, id);
  await channel.drafts.remove(jid, id);
  expect(api.deleted).toEqual([id]);
  const err = await channel.drafts.edit(jid, id, 'final', true).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(DeliveryError);
  expect(err).toMatchObject({ failure: 'permanent', status: 404 });
});

/**
 * Starts gated as a child process, lets the agent show a draft for `text` (a `hang` command), kills gated
 * with SIGKILL and starts it again; resolves once the answer is recorded as sent, with the server.
 */
async function crashBetweenDraftAndAnswer(text: string): Promise<DiscordApiServer> {
  api = closedAfterGateds(await DiscordApiServer.start());
  const server = api;
  const cfg = e2eConfig(tempDir('gated-dc-crash-'), settings(server), SEED);
  const env = {
    GATED_DB: cfg.db,
    GATED_GROUPS_DIR: cfg.groupsDir,
    GATED_POLL_MS: '50',
    GATED_HTTP_PORT: '0',
    GATED_IDLE_TIMEOUT_MS: '2000',
    GATED_LOG_LEVEL: 'warn',
    GATED_AGENT_CMD: FILES_AGENT_CMD,
    DISCORD_BOT_TOKEN: server.token,
    DISCORD_API_ROOT: server.apiRoot,
  };
  const first = spawnGated(['run'], env);
  await server.waitForIdentify();
  say(server, text);
  await server.waitFor(() => server.posted.some((m) => m.content === 'thinking about it'));
  // The draft is on screen and its id recorded: the answer is still to come.
  const watch = new Database(cfg.db, { readonly: true });
  const draftId = () => watch.prepare(`SELECT platform_msg_id FROM drafts`).pluck().get();
  await until(draftId, 10_000, 'the draft row').finally(() => watch.close());
  first.kill('SIGKILL');
  await exited(first);

  const second = spawnGated(['run'], env);
  try {
    const db = new Database(cfg.db, { readonly: true });
    const delivered = () =>
      db.prepare(`SELECT delivery FROM messages WHERE is_from_me = 1`).pluck().all().join() === 'sent';
    await until(delivered, 30_000, 'the answer recorded as sent').finally(() => db.close());
  } finally {
    second.kill('SIGTERM');
    await exited(second);
  }
  return server;
}

test(
  'kill -9 between a draft and the answer: after restart the stale draft becomes the one final text',
  { timeout: 60_000 },
  async () => {
    const server = await crashBetweenDraftAndAnswer('hang');
    expect(server.shown(server.textChannelId).map((m) => m.content)).toEqual(['answer after restart']);
    // The re-run reused the stale draft, and the answer took it over: a second message was never needed.
    expect(server.posted).toHaveLength(1);
    expect(server.edits.map((e) => e.content)).toEqual(['thinking again', 'answer after restart']);
    expect(server.deleted).toEqual([]);
  },
);

test(
  'kill -9 between a draft and a long answer: after restart the stale draft is deleted, the parts sent once',
  { timeout: 60_000 },
  async () => {
    const server = await crashBetweenDraftAndAnswer('hang +1200');
    const [draft, ...parts] = server.posted;
    expect(draft!.content).toBe('thinking about it');
    expect(server.edits.map((e) => e.content)).toEqual(['thinking again']);
    expect(server.deleted).toEqual([draft!.id]);
    const shown = server.shown(server.textChannelId);
    expect(shown.map((m) => m.id)).toEqual(parts.map((p) => p.id));
    expect(shown.map((m) => m.content).join(' ')).toBe(`answer after restart${' x'.repeat(1200)}`);
    expect(shown).toHaveLength(2);
  },
);
