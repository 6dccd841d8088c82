/**
 * Spoken replies by an operator's text-to-speech command (GATED_TTS_CMD, test/voice/tts-cmd.mjs), end to end
 * through telegraf and the local Bot API (docs/VOICE.md): the command reads the reply's text on stdin and
 * the group's voice as GATED_TTS_VOICE (voice.json's `voice`, else its `language`), sees none of gated's
 * secrets, and its WAV reaches Telegram as an Ogg/Opus voice note of real speech; a command that fails
 * leaves the reply as text alone, sent once.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import type { Gated } from '../../gated/app.js';
import { pocketsphinxTranscriber } from '../../voice/transcribers.js';
import { startE2eGated } from '../channels/e2e.js';
import { tempDir } from '../helpers/db.js';
import { writeGroupFile } from '../helpers/group-config.js';
import { until } from '../helpers/process.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { KEY_WORDS } from './speech.js';

const VOICE_AGENT_CMD = 'node "$GATED_HOME/test/agents/voice-agent.mjs"';
const chat: Chat.PrivateChat = { id: 904, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let api: TelegramApiServer;

beforeAll(async () => {
  api = await TelegramApiServer.start();
  api.addChat(chat);
});
afterAll(() => api.close());

interface Call {
  text: string;
  voice: string | null;
  leaked: string[];
}

/** A gated whose group speaks with `voice`, its TTS command in `mode`; the command's calls. */
async function start(
  mode: string,
  voice: Record<string, string>,
): Promise<{ gated: Gated; calls: () => Call[] }> {
  const dir = tempDir();
  writeFileSync(join(dir, 'mode'), mode);
  const gated = await startE2eGated(
    {
      TELEGRAM_BOT_TOKEN: api.token,
      TELEGRAM_API_ROOT: api.url,
      GATED_AGENT_CMD: VOICE_AGENT_CMD,
      GATED_TTS_CMD: `node ${packageFile('test', 'voice', 'tts-cmd.mjs')} ${dir}`,
      GATED_CONFIG_DIR: join(tempDir(), 'config'),
    },
    { groups: [['tg/voice', 'Voice']], routes: [[0, 'platform=telegram', 'tg/voice']] },
  );
  writeGroupFile(gated.config.configDir, 'tg/voice', 'voice.json', JSON.stringify({ speak: true, ...voice }));
  await api.waitForPoll();
  const calls = () =>
    existsSync(join(dir, 'calls'))
      ? readFileSync(join(dir, 'calls'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Call)
      : [];
  return { gated, calls };
}

test("the command gets the reply's text and the group's voice; its speech arrives as a voice note", async () => {
  const { calls } = await start('speak', { voice: 'en-gb', language: 'en' });
  const before = api.sent.length;
  const files = api.sentFiles.length;
  api.message({ chat, from: ada, text: 'say please check the weather tomorrow' });
  await until(() => api.sentFiles.length > files, 120_000, 'the voice note');
  expect(api.sent.slice(before).map((m) => m.text)).toEqual(['please check the weather tomorrow']);
  expect(calls()).toEqual([{ text: 'please check the weather tomorrow', voice: 'en-gb', leaked: [] }]);
  const note = api.sentFiles[files]!;
  expect(note).toMatchObject({ method: 'sendVoice', name: 'reply.ogg' });
  const dir = tempDir();
  writeFileSync(join(dir, 'reply.ogg'), note.data);
  const heard = await pocketsphinxTranscriber(async () => dir).transcribe({
    file: join(dir, 'reply.ogg'),
    mime: 'audio/ogg',
    language: undefined,
    timeoutMs: 120_000,
  });
  for (const w of KEY_WORDS) expect(heard).toContain(w);
}, 180_000);

test('without a voice the language is the voice; a failing command leaves the reply as text alone, once', async () => {
  const { gated, calls } = await start('fail', { language: 'de' });
  const before = api.sent.length;
  const files = api.sentFiles.length;
  api.message({ chat, from: ada, text: 'say guten Tag' });
  await api.waitForSent(before + 1);
  await until(() => calls().length === 1, 120_000, 'the command ran');
  expect(calls()[0]).toMatchObject({ text: 'guten Tag', voice: 'de' });
  await gated.delivery.idle();
  expect(api.sent.slice(before).map((m) => m.text)).toEqual(['guten Tag']);
  expect(api.sentFiles.length).toBe(files);
  expect(gated.db.prepare(`SELECT count(*) FROM outbound_files`).pluck().get()).toBe(0);
  expect(gated.db.prepare(`SELECT delivery FROM messages WHERE is_from_me = 1`).pluck().all()).toEqual([
    'sent',
  ]);
}, 180_000);
