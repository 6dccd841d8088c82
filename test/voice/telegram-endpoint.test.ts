/**
 * Voice through an OpenAI-compatible endpoint, end to end (docs/VOICE.md): a Telegram audio file (MP3) and a
 * video note (MP4) of espeak-ng's speech go through telegraf and the local Bot API, gated uploads them to a
 * local server that speaks `/v1/audio/transcriptions` (test/infra/transcriptions-api.ts, transcribing with
 * the real pocketsphinx), with the group's language from its voice.json and the key as a bearer token; the
 * agent reads the words and never sees the key. A file over the size bound is refused unasked.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { groupDirOf } from '../../core/group-dir.js';
import type { Gated } from '../../gated/app.js';
import { startE2eGated } from '../channels/e2e.js';
import { tempDir } from '../helpers/db.js';
import { writeGroupFile } from '../helpers/group-config.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { TranscriptionsApi } from '../infra/transcriptions-api.js';
import { KEY_WORDS, SENTENCE } from './speech.js';

const VOICE_AGENT_CMD = 'node "$GATED_HOME/test/agents/voice-agent.mjs"';
const chat: Chat.PrivateChat = { id: 903, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let tg: TelegramApiServer;
let asr: TranscriptionsApi;
let mp3: Buffer;
let mp4: Buffer;

/** espeak-ng's speech of the sentence, encoded by ffmpeg with `args` into `name`. */
function spoken(name: string, args: string[]): Buffer {
  const dir = tempDir();
  const wav = join(dir, 'speech.wav');
  execFileSync('espeak-ng', ['-w', wav, SENTENCE]);
  const out = join(dir, name);
  execFileSync('ffmpeg', ['-nostdin', '-v', 'error', '-y', ...args.map((a) => (a === 'WAV' ? wav : a)), out]);
  return readFileSync(out);
}

beforeAll(async () => {
  mp3 = spoken('speech.mp3', ['-i', 'WAV', '-c:a', 'libmp3lame', '-b:a', '64k']);
  // A round video note: a still picture and the speech, H.264 in MP4. Its sound is Opus: Telegram's own AAC
  // shifts espeak-ng's short sentence by the encoder's priming enough that pocketsphinx mishears it.
  mp4 = spoken('note.mp4', [
    ...['-f', 'lavfi', '-i', 'color=c=blue:s=240x240:r=10', '-i', 'WAV', '-map', '0:v', '-map', '1:a'],
    ...['-shortest', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'],
    ...['-c:a', 'libopus', '-b:a', '32k'],
  ]);
  tg = await TelegramApiServer.start();
  tg.addChat(chat);
  asr = await TranscriptionsApi.start();
}, 180_000);
afterAll(async () => {
  await tg.close();
  await asr.close();
});

const seed = {
  groups: [['tg/voice', 'Voice']] as Array<[string, string]>,
  routes: [[0, 'platform=telegram', 'tg/voice']] as Array<[number, string, string]>,
};

async function start(more: Record<string, string> = {}): Promise<Gated> {
  const gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: tg.token,
      TELEGRAM_API_ROOT: tg.url,
      GATED_AGENT_CMD: VOICE_AGENT_CMD,
      GATED_TRANSCRIBE_URL: asr.url,
      GATED_TRANSCRIBE_KEY: asr.key,
      GATED_TRANSCRIBE_FORMAT: 'text',
      GATED_CONFIG_DIR: join(tempDir(), 'config'),
      ...more,
    },
    seed,
  );
  await tg.waitForPoll();
  return gated;
}

const inputsOf = (gated: Gated) =>
  readFileSync(join(groupDirOf(gated.config.groupsDir, 'tg/voice'), 'inputs.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { messages: Array<{ content: string; transcript?: boolean }> })
    .flatMap((i) => i.messages);

test('an MP3 audio file and a video note: uploaded with the group language and the key, words to the agent', async () => {
  const gated = await start();
  writeGroupFile(gated.config.configDir, 'tg/voice', 'voice.json', JSON.stringify({ language: 'de' }));
  const before = tg.sent.length;
  const asked = asr.requests.length;
  tg.message({ chat, from: ada, text: '', file: { kind: 'audio', data: mp3, name: 'memo.mp3' } });
  const [first] = (await tg.waitForSent(before + 1)).slice(before);
  expect(first!.text).toMatch(/^heard: .*weather.* \[transcript\] \[audio inbox\/\d+\/0-memo\.mp3\]$/);
  tg.message({ chat, from: ada, text: 'from the car', file: { kind: 'video_note', data: mp4 } });
  const [second] = (await tg.waitForSent(before + 2)).slice(before + 1);
  expect(second!.text).toMatch(
    /^heard: from the car\n\n.*weather.* \[transcript\] \[audio .*video_note\.mp4\]$/,
  );

  expect(asr.requests.slice(asked)).toEqual([
    expect.objectContaining({
      authorization: `Bearer ${asr.key}`,
      responseFormat: 'text',
      language: 'de',
      fileType: 'audio/mpeg',
      fileBytes: mp3.length,
    }),
    expect.objectContaining({ language: 'de', fileType: 'video/mp4', fileBytes: mp4.length }),
  ]);
  const words = inputsOf(gated).filter((m) => m.transcript === true);
  expect(words).toHaveLength(2);
  for (const m of words) for (const w of KEY_WORDS) expect(m.content).toContain(w);
  // The key is gated's secret: not in the agent's environment, not in what it was given.
  const dir = groupDirOf(gated.config.groupsDir, 'tg/voice');
  expect(Object.values(JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8')))).not.toContain(asr.key);
  expect(readFileSync(join(dir, 'inputs.jsonl'), 'utf8')).not.toContain(asr.key);
  expect(gated.db.prepare(`SELECT DISTINCT transcriber FROM transcriptions`).pluck().all()).toEqual([
    `endpoint ${new URL(asr.url).host}`,
  ]);
}, 240_000);

test('an audio file larger than GATED_TRANSCRIBE_MAX_BYTES is refused with its reason, the endpoint unasked', async () => {
  const gated = await start({ GATED_TRANSCRIBE_MAX_BYTES: '4096' });
  const before = tg.sent.length;
  const asked = asr.requests.length;
  tg.message({ chat, from: ada, text: '', file: { kind: 'audio', data: mp3, name: 'memo.mp3' } });
  const [reply] = (await tg.waitForSent(before + 1)).slice(before);
  expect(reply!.text).toMatch(
    /^heard: \[voice message not transcribed: it is 0\.\d MB, larger than the 0\.0 MB limit; the audio is attached\] \[audio /,
  );
  expect(asr.requests.length).toBe(asked);
  expect(gated.db.prepare(`SELECT state FROM transcriptions`).pluck().get()).toBe('refused');
}, 180_000);
