/**
 * Discord files end to end: the whole gateway (startE2eGated, process runtime) with real discord.js against the
 * local Discord server. A file a user attaches is downloaded from its CDN URL into the routed group's folder
 * and the agent reads it there; a file the agent names is uploaded back as a message attachment (multipart),
 * and a crash after the upload was accepted does not upload it twice.
 */
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { closedAfterGateds, FILES_AGENT_CMD } from '../helpers/gated.js';
import { exited, spawnGated, until } from '../helpers/process.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { startE2eGated } from './e2e.js';
import { e2eConfig, type E2eSeed } from './support.js';
import { groupDirOf } from '../../core/group-dir.js';

const ada = { id: '700000000000000042', username: 'ada', global_name: 'Ada' };
const GROUP = 'dc/files';

let api: DiscordApiServer | undefined;
let gated: Gated | undefined;

const SEED: E2eSeed = { groups: [[GROUP, 'Files']], routes: [[0, 'platform=discord', GROUP]] };

/** The settings of these tests for the local Discord server, with `env` over them. */
function settings(server: DiscordApiServer, env: Record<string, string> = {}): Record<string, string> {
  return {
    DISCORD_BOT_TOKEN: server.token,
    DISCORD_API_ROOT: server.apiRoot,
    GATED_AGENT_CMD: FILES_AGENT_CMD,
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

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 12);

/** The messages of the agent's input lines (it logs each line to inputs.jsonl in its folder). */
function agentInputs(
  g: Gated,
): Array<{ content: string; attachments?: unknown[]; attachment_notes?: string[] }> {
  const log = readFileSync(join(groupDirOf(g.config.groupsDir, GROUP), 'inputs.jsonl'), 'utf8');
  return log
    .trim()
    .split('\n')
    .flatMap((l) => (JSON.parse(l) as { messages: never[] }).messages);
}

test('a photo and a text file a user attaches reach the agent as files in its folder, listed with path, mime, size, name', async () => {
  const { api, gated } = await start();
  const photo = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.alloc(300, 7)]);
  const msg = api.push({
    channelId: api.textChannelId,
    author: ada,
    content: `<@${api.bot.id}> look`,
    mentions: [api.bot],
    attachments: [
      { name: 'holiday photo.png', data: photo, contentType: 'image/png' },
      { name: 'notes.txt', data: Buffer.from('hello\n'), contentType: 'text/plain; charset=utf-8' },
    ],
  });
  const [reply] = await api.waitForPosted(1);
  const row = gated.db
    .prepare(`SELECT id FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`)
    .get(msg.id) as { id: number };
  const path = `inbox/${row.id}/0-holiday_photo.png`;
  const notes = `inbox/${row.id}/1-notes.txt`;
  expect(reply!.content).toBe(
    [
      `saw holiday_photo.png ${photo.length} ${sha(photo)} at ${path}`,
      `saw notes.txt 6 ${sha(Buffer.from('hello\n'))} at ${notes}`,
    ].join('\n'),
  );
  expect(reply!.message_reference).toMatchObject({ message_id: msg.id });
  expect(readFileSync(join(groupDirOf(gated.config.groupsDir, GROUP), path))).toEqual(photo);
  expect(agentInputs(gated)).toEqual([
    expect.objectContaining({
      content: 'look',
      attachments: [
        { path, mime: 'image/png', size: photo.length, name: 'holiday_photo.png' },
        { path: notes, mime: 'text/plain', size: 6, name: 'notes.txt' },
      ],
    }),
  ]);
  expect(
    gated.db
      .prepare(`SELECT kind, mime, size, state FROM attachments WHERE message_id = ? ORDER BY seq`)
      .all(row.id),
  ).toEqual([
    { kind: 'image', mime: 'image/png', size: photo.length, state: 'saved' },
    { kind: 'document', mime: 'text/plain', size: 6, state: 'saved' },
  ]);
  expect(api.cdnDownloads).toBe(2);
});

test('an attachment over GATED_MAX_ATTACHMENT_BYTES is not downloaded: the agent gets a note', async () => {
  const { api, gated } = await start({ GATED_MAX_ATTACHMENT_BYTES: '100' });
  api.push({
    channelId: api.textChannelId,
    author: ada,
    content: '',
    attachments: [{ name: 'report.pdf', data: Buffer.alloc(500, 1), contentType: 'application/pdf' }],
  });
  await api.waitForPosted(1);
  // A listed size that lies: the download starts and is cut off at the cap.
  api.push({
    channelId: api.textChannelId,
    author: ada,
    content: 'small?',
    attachments: [{ name: 'clip.mp4', data: Buffer.alloc(500, 2), contentType: 'video/mp4', size: 50 }],
  });
  await api.waitForPosted(2);
  const replies = api.posted.map((p) => p.content);
  expect(replies[0]).toMatch(/^note: document report\.pdf was not downloaded: .*500 bytes.*100 bytes/);
  expect(replies[1]).toMatch(/^note: video clip\.mp4 was not downloaded: .*100 bytes/);
  expect(api.cdnDownloads).toBe(1);
  expect(gated.db.prepare(`SELECT state FROM attachments ORDER BY id`).pluck().all()).toEqual([
    'too_large',
    'too_large',
  ]);
  expect(agentInputs(gated).flatMap((m) => m.attachments ?? [])).toEqual([]);
});

test('a failing download is retried until it works', async () => {
  const { api, gated } = await start();
  api.failDownloads(2);
  const voice = Buffer.from('OggS fake voice');
  api.push({
    channelId: api.textChannelId,
    author: ada,
    content: '',
    attachments: [{ name: 'voice-message.ogg', data: voice, contentType: 'audio/ogg' }],
  });
  const [reply] = await api.waitForPosted(1);
  expect(reply!.content).toMatch(/^saw voice-message\.ogg 15 /);
  expect(api.cdnDownloads).toBe(3);
  expect(gated.db.prepare(`SELECT attempts, state FROM attachments`).get()).toEqual({
    attempts: 2,
    state: 'saved',
  });
});

test('a file the agent names arrives as an attachment with its bytes, after the text', async () => {
  const { api, gated } = await start();
  const msg = api.push({ channelId: api.textChannelId, author: ada, content: 'send chart.png' });
  const [text, file] = await api.waitForPosted(2);
  expect(text).toMatchObject({ content: 'here is chart.png', message_reference: { message_id: msg.id } });
  expect(file!.content).toBe('');
  expect(file!.attachments).toHaveLength(1);
  expect(file!.attachments[0]).toMatchObject({ name: 'chart.png', contentType: 'image/png' });
  const png = readFileSync(join(groupDirOf(gated.config.groupsDir, GROUP), 'out/chart.png'));
  expect(file!.attachments[0]!.data).toEqual(png);
  await gated.delivery.idle();
  const parts = gated.db.prepare(`SELECT part, platform_msg_id FROM outbound_parts ORDER BY part`).all();
  expect(parts).toEqual([
    { part: 0, platform_msg_id: text!.id },
    { part: 1, platform_msg_id: file!.id },
  ]);
});

test(
  'kill -9 after an upload was accepted but before it was recorded: the restart does not upload it again',
  { timeout: 60_000 },
  async () => {
    api = closedAfterGateds(await DiscordApiServer.start());
    const server = api;
    const cfg = e2eConfig(tempDir('gated-dc-files-crash-'), settings(server), SEED);
    const env = {
      GATED_DB: cfg.db,
      GATED_GROUPS_DIR: cfg.groupsDir,
      GATED_POLL_MS: '50',
      GATED_HTTP_PORT: '0',
      GATED_LOG_LEVEL: 'warn',
      GATED_AGENT_CMD: FILES_AGENT_CMD,
      DISCORD_BOT_TOKEN: server.token,
      DISCORD_API_ROOT: server.apiRoot,
    };
    const first = spawnGated(['run'], env);
    await server.waitForIdentify();
    // The text part is answered; the upload is made but its answer never comes back.
    server.swallowNextUploads(1);
    server.push({ channelId: server.textChannelId, author: ada, content: 'send notes.txt' });
    await server.waitForPosted(2);
    first.kill('SIGKILL');
    await exited(first);

    const second = spawnGated(['run'], env);
    try {
      const db = new Database(cfg.db, { readonly: true });
      const delivery = () => db.prepare(`SELECT delivery FROM messages WHERE is_from_me = 1`).pluck().get();
      await until(() => delivery() === 'sent', 30_000, 'the reply recorded as sent').finally(() =>
        db.close(),
      );
      // The second process sent the file part again with the same nonce: the server answered with the
      // message the first upload made, and nothing new was posted.
      expect(server.nonceHits).toBe(1);
      expect(server.posted.map((p) => [p.content, p.attachments.map((a) => a.data.toString())])).toEqual([
        ['here is notes.txt', []],
        ['', ['contents of notes.txt\n']],
      ]);
    } finally {
      second.kill('SIGTERM');
      await exited(second);
    }
  },
);
