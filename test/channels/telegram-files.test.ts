/**
 * Telegram files end to end: the whole gateway (startGated, process runtime) with real telegraf against the
 * local Bot API server. A photo a user sends is downloaded into the routed group's folder and the agent
 * reads it there; a file the agent names is uploaded back with sendPhoto / sendDocument.
 */
import { createHash } from 'node:crypto';
import { readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { closedAfterGateds, FILES_AGENT_CMD } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { startE2eGated } from './e2e.js';
import { groupDirOf } from '../../core/group-dir.js';

const chat: Chat.PrivateChat = { id: 777, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let api: TelegramApiServer | undefined;
let gated: Gated | undefined;

async function start(env: Record<string, string> = {}): Promise<{ api: TelegramApiServer; gated: Gated }> {
  api = closedAfterGateds(await TelegramApiServer.start());
  api.addChat(chat);
  gated = await startE2eGated(
    { TELEGRAM_BOT_TOKEN: api.token, TELEGRAM_API_ROOT: api.url, GATED_AGENT_CMD: FILES_AGENT_CMD, ...env },
    { groups: [['tg/files', 'Files']], routes: [[0, 'platform=telegram', 'tg/files']] },
  );
  await api.waitForPoll();
  return { api, gated };
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 12);

test('a photo reaches the agent as a file in its folder (largest size), listed with its path', async () => {
  const { api, gated } = await start();
  const photo = Buffer.from('not really a jpeg, but bytes all the same: '.repeat(50));
  const msg = api.message({ chat, from: ada, text: 'look', file: { kind: 'photo', data: photo } });
  const [reply] = await api.waitForSent(1);
  const row = gated.db
    .prepare(`SELECT id FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`)
    .get(String(msg.message_id)) as { id: number };
  const path = `inbox/${row.id}/0-photo.jpg`;
  expect(reply!.text).toBe(`saw photo.jpg ${photo.length} ${sha(photo)} at ${path}`);
  expect(readFileSync(join(groupDirOf(gated.config.groupsDir, 'tg/files'), path))).toEqual(photo);
  expect(
    gated.db.prepare(`SELECT kind, mime, size, state FROM attachments WHERE message_id = ?`).get(row.id),
  ).toEqual({ kind: 'photo', mime: 'image/jpeg', size: photo.length, state: 'saved' });
  expect(api.downloads).toBe(1);
});

test('a document over GATED_MAX_ATTACHMENT_BYTES is not downloaded: the agent gets a note', async () => {
  const { api, gated } = await start({ GATED_MAX_ATTACHMENT_BYTES: '100' });
  api.message({
    chat,
    from: ada,
    text: '',
    file: {
      kind: 'document',
      data: Buffer.alloc(500, 1),
      name: '../../etc/big report.pdf',
      mime: 'application/pdf',
    },
  });
  const [reply] = await api.waitForSent(1);
  expect(reply!.text).toMatch(/^note: document big_report.pdf was not downloaded: .*500 bytes.*100 bytes/);
  expect(api.downloads).toBe(0);
  expect(gated.db.prepare(`SELECT state FROM attachments`).pluck().get()).toBe('too_large');
});

test('a failing download is retried until it works', async () => {
  const { api, gated } = await start();
  api.failNext('getFile', { status: 502 }, 2);
  const voice = Buffer.from('OggS fake voice');
  api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: voice } });
  await until(() => api.sentFiles.length + api.sent.length >= 1, 15_000, 'a reply');
  expect(api.sent[0]!.text).toMatch(/^saw voice\.ogg 15 /);
  expect(api.count('getFile')).toBe(3);
  expect(gated.db.prepare(`SELECT attempts FROM attachments`).pluck().get()).toBe(2);
});

test('files the agent names arrive as photo and document; a path outside the folder is refused', async () => {
  const { api, gated } = await start();
  api.message({ chat, from: ada, text: 'send chart.png' });
  await until(() => api.sentFiles.length >= 1 && api.sent.length >= 1, 10_000, 'photo sent');
  expect(api.sent[0]!.text).toBe('here is chart.png');
  expect(api.sentFiles[0]).toMatchObject({ method: 'sendPhoto', name: 'chart.png', chat_id: chat.id });
  expect(api.sentFiles[0]!.data.subarray(1, 4).toString()).toBe('PNG');

  api.message({ chat, from: ada, text: 'send notes.txt' });
  await until(() => api.sentFiles.length >= 2, 10_000, 'document sent');
  expect(api.sentFiles[1]).toMatchObject({ method: 'sendDocument', name: 'notes.txt' });
  expect(api.sentFiles[1]!.data.toString()).toBe('contents of notes.txt\n');

  // The database, by a relative path and by a symlink inside the folder that points at it.
  symlinkSync(gated.config.db, join(groupDirOf(gated.config.groupsDir, 'tg/files'), 'link.db'));
  api.message({ chat, from: ada, text: 'send-path ../../../gated.db' });
  await until(() => api.sent.length >= 3, 10_000, 'third reply');
  api.message({ chat, from: ada, text: 'send-path link.db' });
  await until(() => api.sent.length >= 4, 10_000, 'fourth reply');
  expect(api.sent.slice(2).map((m) => m.text)).toEqual(['sending that path', 'sending that path']);
  const refused = gated.db
    .prepare(`SELECT path, state, error FROM outbound_files WHERE state = 'refused' ORDER BY message_id`)
    .all();
  expect(refused).toEqual([
    { path: '../../../gated.db', state: 'refused', error: 'outside the folder' },
    { path: 'link.db', state: 'refused', error: 'symlink' },
  ]);
  await gated.delivery.idle();
  expect(api.sentFiles).toHaveLength(2);
  // Each file is a recorded part of its reply: text part 0, file part 1.
  expect(gated.db.prepare(`SELECT count(*) FROM outbound_parts WHERE part = 1`).pluck().get()).toBe(2);
});
