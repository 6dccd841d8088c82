/**
 * Voice on Telegram end to end, on real parts (docs/VOICE.md): espeak-ng speaks a sentence, ffmpeg makes it
 * an Ogg/Opus voice note, a user sends it through the local Bot API, telegraf takes it, the real pocketsphinx
 * transcribes it (GATED_TRANSCRIBE_CMD=pocketsphinx), and the agent reads the words marked as a transcript
 * with the audio still attached in its folder. A transcript is never a command; a 2-hour file is refused
 * with a reason and the agent still hears of it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { groupDirOf } from '../../core/group-dir.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { startE2eGated } from '../channels/e2e.js';
import { KEY_WORDS, silence, voiceNote } from './speech.js';
import { pocketsphinxTranscriber } from '../../voice/transcribers.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { writeGroupFile } from '../helpers/group-config.js';

/** The codec of a file's first audio stream (ffprobe). */
function codecOf(file: string): string {
  return execFileSync('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    'a:0',
    '-show_entries',
    'stream=codec_name',
    '-of',
    'csv=p=0',
    file,
  ])
    .toString()
    .trim();
}

export const VOICE_AGENT_CMD = 'node "$GATED_HOME/test/agents/voice-agent.mjs"';

const chat: Chat.PrivateChat = { id: 901, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let api: TelegramApiServer;
let gated: Gated;
let note: Buffer;

// One Bot API server and one voice note for the file; a gated per test (the helpers close it after each).
beforeAll(async () => {
  note = await voiceNote();
  api = await TelegramApiServer.start();
  api.addChat(chat);
}, 60_000);

beforeEach(async () => {
  gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
      GATED_AGENT_CMD: VOICE_AGENT_CMD,
      GATED_TRANSCRIBE_CMD: 'pocketsphinx',
      GATED_CONFIG_DIR: join(tempDir(), 'config'),
    },
    { groups: [['tg/voice', 'Voice']], routes: [[0, 'platform=telegram', 'tg/voice']] },
  );
  await api.waitForPoll();
});

afterAll(async () => {
  await api.close();
});

const rowOf = (msgId: number) =>
  gated.db
    .prepare(
      `SELECT id, content, transcript, state FROM messages WHERE platform_msg_id = ? AND is_from_me = 0`,
    )
    .get(String(msgId)) as { id: number; content: string; transcript: number | null; state: string };

test('a spoken voice note reaches the agent as its words, marked as a transcript, the audio attached', async () => {
  const before = api.sent.length;
  const msg = api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: note } });
  const [reply] = (await api.waitForSent(before + 1)).slice(before);
  const row = rowOf(msg.message_id);
  for (const w of KEY_WORDS) expect(row.content).toContain(w);
  expect(row).toMatchObject({ transcript: 1, state: 'done' });
  // The agent's input: the words, `transcript: true`, and the voice note itself in its folder.
  const dir = groupDirOf(gated.config.groupsDir, 'tg/voice');
  const inputs = readFileSync(join(dir, 'inputs.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const m = inputs.flatMap((i) => i.messages).find((x: { id: number }) => x.id === row.id);
  expect(m.transcript).toBe(true);
  for (const w of KEY_WORDS) expect(m.content).toContain(w);
  expect(m.attachments).toHaveLength(1);
  expect(readFileSync(join(dir, m.attachments[0].path))).toEqual(note);
  expect(reply!.text).toMatch(/^heard: .*weather.* \[transcript\] \[audio inbox\/\d+\/0-voice\.ogg\]$/);
  const t = gated.db
    .prepare(`SELECT state, attempts, duration_s, transcriber FROM transcriptions WHERE message_id = ?`)
    .get(row.id);
  expect(t).toMatchObject({ state: 'done', attempts: 0, transcriber: 'pocketsphinx' });
  expect((t as { duration_s: number }).duration_s).toBeGreaterThan(1);
}, 60_000);

test('a 2-hour voice note is refused with its reason; the agent hears of it, the audio stays attached', async () => {
  const before = api.sent.length;
  const msg = api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: silence(7200) } });
  const [reply] = (await api.waitForSent(before + 1)).slice(before);
  const row = rowOf(msg.message_id);
  expect(row.transcript).toBe(0);
  expect(row.content).toBe(
    '[voice message not transcribed: it is 2 h long, longer than the 10 min limit; the audio is attached]',
  );
  expect(reply!.text).toMatch(/^heard: \[voice message not transcribed: it is 2 h long.*\] \[audio /);
  expect(
    gated.db.prepare(`SELECT state, error FROM transcriptions WHERE message_id = ?`).get(row.id),
  ).toEqual({
    state: 'refused',
    error: 'it is 2 h long, longer than the 10 min limit',
  });
}, 60_000);

test('a group that speaks: the reply also arrives as a Telegram voice note of real speech', async () => {
  writeGroupFile(gated.config.configDir, 'tg/voice', 'voice.json', JSON.stringify({ speak: true }));
  const before = api.sent.length;
  const files = api.sentFiles.length;
  api.message({ chat, from: ada, text: 'say please check the weather tomorrow' });
  await until(() => api.sentFiles.length > files, 30_000, 'the voice note');
  expect(api.sent.slice(before).map((m) => m.text)).toEqual(['please check the weather tomorrow']);
  const voice = api.sentFiles[files]!;
  expect(voice).toMatchObject({ method: 'sendVoice', chat_id: chat.id, name: 'reply.ogg' });
  // An Ogg/Opus file that pocketsphinx hears the words in.
  const dir = tempDir();
  const file = join(dir, 'reply.ogg');
  writeFileSync(file, voice.data);
  expect(codecOf(file)).toBe('opus');
  const heard = await pocketsphinxTranscriber(async () => dir).transcribe({
    file,
    mime: 'audio/ogg',
    language: undefined,
    timeoutMs: 120_000,
  });
  for (const w of KEY_WORDS) expect(heard).toContain(w);
  const row = gated.db.prepare(`SELECT path, mime, spoken FROM outbound_files WHERE spoken = 1`).get() as {
    path: string;
  };
  expect(row).toMatchObject({ mime: 'audio/ogg', spoken: 1 });
  expect(row.path).toMatch(/^outbox\/spoken\/\d+\.ogg$/);
  await gated.delivery.idle();
  expect(api.sentFiles).toHaveLength(files + 1);
}, 60_000);

test('a text message never waits for the transcriber', async () => {
  const before = api.sent.length;
  api.message({ chat, from: ada, text: 'plain words' });
  const [reply] = (await api.waitForSent(before + 1)).slice(before);
  expect(reply!.text).toBe('heard: plain words');
  expect(gated.db.prepare(`SELECT count(*) FROM transcriptions`).pluck().get()).toBe(0);
}, 30_000);
