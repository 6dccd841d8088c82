/**
 * Telegram files both ways with the agent in a container: the whole gateway (startE2eGated, docker runtime on a
 * private dockerd from test/infra/dockerd.ts) with real telegraf against the local Bot API server. The
 * agent (test/agents/files-agent.mjs, built into an image) reads the photo a user sent at the path its
 * input lists, relative to /workspace (the group's folder mounted), and answers with its size and hash; the
 * files it writes there are uploaded back. The folder a host process would see is not enough: the file
 * must be visible inside the container. A voice note is transcribed on the host (the real pocketsphinx) and
 * the agent in its container reads the words, marked as a transcript, with the audio in its folder.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import type { Gated } from '../../gated/app.js';
import { INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { getState } from '../../store/state.js';
import { closedAfterGateds, closeTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { startE2eGated } from './e2e.js';
import { groupDirOf } from '../../core/group-dir.js';
import { KEY_WORDS, voiceNote } from '../voice/speech.js';

const IMAGE = 'gated-files-agent:test';
const VOICE_IMAGE = 'gated-voice-agent:test';
const chat: Chat.PrivateChat = { id: 778, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let engine: TestDockerd | undefined;
let api: TelegramApiServer | undefined;
let gated: Gated | undefined;

beforeAll(async () => {
  engine = await startDockerd();
  await engine.buildAgentImage(IMAGE, packageFile('test', 'agents'), 'files-agent.mjs');
  await engine.buildAgentImage(VOICE_IMAGE, packageFile('test', 'agents'), 'voice-agent.mjs');
}, 300_000);

// Before test/helpers/gated.ts's own close, for the longer grace the containers' runs get.
afterEach(async () => {
  if (gated) await closeTestGated(gated, 5000);
  gated = undefined;
});

afterAll(async () => {
  await engine?.stop();
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 12);

test('a photo reaches the agent in its container as a file of its folder; its files reach Telegram', async () => {
  api = closedAfterGateds(await TelegramApiServer.start());
  api.addChat(chat);
  gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
      GATED_RUNTIME: 'docker',
      DOCKER_HOST: engine!.host,
      GATED_AGENT_IMAGE: IMAGE,
      // The agent stays between the messages: its container is checked while it runs.
      GATED_IDLE_TIMEOUT_MS: '20000',
    },
    { groups: [['tg/files', 'Files']], routes: [[0, 'platform=telegram', 'tg/files']] },
  );
  const g = gated;
  await api.waitForPoll();

  const photo = Buffer.from('a photo from Telegram, bytes only: '.repeat(64));
  const msg = api.message({ chat, from: ada, text: 'look', file: { kind: 'photo', data: photo } });
  const [reply] = await api.waitForSent(1);
  const row = g.db
    .prepare(`SELECT id FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`)
    .get(String(msg.message_id)) as { id: number };
  // The agent read the file at the listed path from its working directory, inside the container.
  expect(reply!.text).toBe(`saw photo.jpg ${photo.length} ${sha(photo)} at inbox/${row.id}/0-photo.jpg`);

  // It did run in a container of this gated, with the group's folder as its /workspace.
  const instance = getState(g.db, 'instance_id')!;
  const [running] = await engine!.docker.listContainers({
    filters: { label: [`${INSTANCE_LABEL}=${instance}`] },
  });
  expect(running).toBeDefined();
  const info = await engine!.docker.getContainer(running!.Id).inspect();
  expect(info.Config.Image).toBe(IMAGE);
  expect(info.Mounts.find((m) => m.Destination === '/workspace')?.Source).toBe(
    groupDirOf(g.config.groupsDir, 'tg/files'),
  );

  // A file that arrives while the container runs (the folder already handed to the agent's user) is
  // there too, readable: a document, as a follow-up of the same run.
  const pdf = Buffer.from('%PDF-1.4 a report\n'.repeat(40));
  const doc = api.message({
    chat,
    from: ada,
    text: '',
    file: { kind: 'document', data: pdf, name: 'report.pdf', mime: 'application/pdf' },
  });
  const [, second] = await api.waitForSent(2);
  const docRow = g.db
    .prepare(`SELECT id, run_id FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`)
    .get(String(doc.message_id)) as { id: number; run_id: number };
  expect(second!.text).toBe(`saw report.pdf ${pdf.length} ${sha(pdf)} at inbox/${docRow.id}/0-report.pdf`);
  expect(docRow.run_id).toBe(Number(running!.Labels['gated.run']));

  // Files the agent writes in its folder, inside the container, are uploaded: a photo and a document.
  api.message({ chat, from: ada, text: 'send chart.png' });
  await until(() => api!.sentFiles.length >= 1 && api!.sent.length >= 3, 30_000, 'the photo sent');
  expect(api.sent[2]!.text).toBe('here is chart.png');
  expect(api.sentFiles[0]).toMatchObject({ method: 'sendPhoto', name: 'chart.png', chat_id: chat.id });
  expect(api.sentFiles[0]!.data.subarray(1, 4).toString()).toBe('PNG');
  api.message({ chat, from: ada, text: 'send notes.txt' });
  await until(() => api!.sentFiles.length >= 2, 30_000, 'the document sent');
  expect(api.sentFiles[1]).toMatchObject({ method: 'sendDocument', name: 'notes.txt' });
  expect(api.sentFiles[1]!.data.toString()).toBe('contents of notes.txt\n');
  expect(g.db.prepare(`SELECT count(*) FROM outbound_files WHERE state = 'refused'`).pluck().get()).toBe(0);
}, 180_000);

test('a voice note is transcribed before the run; the agent in its container reads the words and the audio', async () => {
  api = closedAfterGateds(await TelegramApiServer.start());
  api.addChat(chat);
  gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
      GATED_RUNTIME: 'docker',
      DOCKER_HOST: engine!.host,
      GATED_AGENT_IMAGE: VOICE_IMAGE,
      GATED_TRANSCRIBE_CMD: 'pocketsphinx',
    },
    { groups: [['tg/voice', 'Voice']], routes: [[0, 'platform=telegram', 'tg/voice']] },
  );
  const g = gated;
  await api.waitForPoll();
  const note = await voiceNote();
  const msg = api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: note } });
  const [reply] = await api.waitForSent(1);
  const row = g.db
    .prepare(`SELECT id, transcript FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`)
    .get(String(msg.message_id)) as { id: number; transcript: number };
  // The agent found the voice note at its path inside the container (else the line says "missing").
  expect(reply!.text).toMatch(
    new RegExp(`^heard: .*weather.* \\[transcript\\] \\[audio inbox/${row.id}/0-voice\\.ogg\\]$`),
  );
  expect(row.transcript).toBe(1);
  const dir = groupDirOf(g.config.groupsDir, 'tg/voice');
  const input = JSON.parse(readFileSync(join(dir, 'inputs.jsonl'), 'utf8').trim().split('\n')[0]!) as {
    messages: Array<{ content: string; transcript: boolean; attachments: Array<{ path: string }> }>;
  };
  const [m] = input.messages;
  expect(m!.transcript).toBe(true);
  for (const w of KEY_WORDS) expect(m!.content).toContain(w);
  expect(readFileSync(join(dir, m!.attachments[0]!.path))).toEqual(note);
  // It ran in a container, in /workspace (the group's folder mounted), never on the host in the folder.
  const env = JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8')) as Record<string, string>;
  expect(env.VOICE_AGENT_CWD).toBe('/workspace');
}, 180_000);
