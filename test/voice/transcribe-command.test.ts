/**
 * Transcription by an operator's command (GATED_TRANSCRIBE_CMD) that the test controls
 * (test/voice/transcriber-cmd.mjs), end to end through telegraf and the local Bot API: a transcript is
 * never a command and never changes the chat's sticky state; a failing transcriber is retried with backoff
 * and the message then goes on with a note; and kill -9 of gated in the middle of a transcription leaves
 * the row to be transcribed and answered exactly once after the restart.
 */
import Database from 'better-sqlite3';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { startE2eGated } from '../channels/e2e.js';
import { tempDir } from '../helpers/db.js';
import { writeGroupFile } from '../helpers/group-config.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { silence } from './speech.js';

const VOICE_AGENT_CMD = 'node "$GATED_HOME/test/agents/voice-agent.mjs"';
const chat: Chat.PrivateChat = { id: 902, type: 'private', first_name: 'Ada' };
const ada: User = { id: 42, is_bot: false, first_name: 'Ada' };

let api: TelegramApiServer;
let audio: Buffer;

beforeAll(async () => {
  // Two seconds of silence: real Ogg/Opus for ffprobe; the command decides what was "said".
  audio = silence(2);
  api = await TelegramApiServer.start();
  api.addChat(chat);
}, 60_000);
afterAll(() => api.close());

/** A control folder for the command, in `mode`; the setting that runs it. */
function control(mode: string): { dir: string; cmd: string; calls: () => number } {
  const dir = tempDir();
  writeFileSync(join(dir, 'mode'), mode);
  const calls = () =>
    existsSync(join(dir, 'calls')) ? readFileSync(join(dir, 'calls'), 'utf8').split('\n').length - 1 : 0;
  return { dir, cmd: `node ${packageFile('test', 'voice', 'transcriber-cmd.mjs')} ${dir}`, calls };
}

const seed = {
  groups: [['tg/voice', 'Voice']] as Array<[string, string]>,
  routes: [[0, 'platform=telegram', 'tg/voice']] as Array<[number, string, string]>,
};
const env = (cmd: string, more: Record<string, string> = {}) => ({
  TELEGRAM_BOT_TOKEN: api.token,
  TELEGRAM_API_ROOT: api.url,
  GATED_AGENT_CMD: VOICE_AGENT_CMD,
  GATED_TRANSCRIBE_CMD: cmd,
  ...more,
});

test('a transcript is never a command and never changes the sticky state: the agent gets the words', async () => {
  const c = control('print /ping');
  const gated = await startE2eGated(env(c.cmd, { GATED_CONFIG_DIR: join(tempDir(), 'config') }), seed);
  // The group's language reaches the command as GATED_TRANSCRIBE_LANGUAGE.
  writeGroupFile(gated.config.configDir, 'tg/voice', 'voice.json', JSON.stringify({ language: 'fr' }));
  await api.waitForPoll();
  const before = api.sent.length;
  api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: audio } });
  const [reply] = (await api.waitForSent(before + 1)).slice(before);
  expect(reply!.text).toMatch(/^heard: \/ping \[transcript\] \[audio inbox\/\d+\/0-voice\.ogg\]$/);
  writeFileSync(join(c.dir, 'mode'), 'print #secret');
  api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: audio } });
  const [second] = (await api.waitForSent(before + 2)).slice(before + 1);
  expect(second!.text).toMatch(/^heard: #secret \[transcript\]/);
  // No pong, no "messages of this chat now go to topic #secret": the chat's state is untouched.
  expect(api.sent.slice(before).map((m) => m.text)).toHaveLength(2);
  expect(
    gated.db
      .prepare(`SELECT sticky_group, sticky_topic FROM chat_state WHERE chat_jid = ?`)
      .get(`telegram:${chat.id}`) ?? null,
  ).toEqual(null);
  expect(
    gated.db.prepare(`SELECT state FROM messages WHERE is_from_me = 0 ORDER BY id`).pluck().all(),
  ).toEqual(['done', 'done']);
  expect(readFileSync(join(c.dir, 'calls'), 'utf8')).toMatch(/^\S+\.ogg fr\n\S+\.ogg fr\n$/);
}, 60_000);

test('a failing transcriber is retried with backoff, then the message goes on with a clear note', async () => {
  const c = control('fail');
  const gated = await startE2eGated(env(c.cmd, { GATED_TRANSCRIBE_ATTEMPTS: '2' }), seed);
  await api.waitForPoll();
  const before = api.sent.length;
  api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: audio } });
  const [reply] = (await api.waitForSent(before + 1)).slice(before);
  expect(reply!.text).toMatch(
    /^heard: \[voice message not transcribed: the transcriber failed \(sh exited 1: model not loaded\); the audio is attached\] \[audio inbox\/\d+\/0-voice\.ogg\]$/,
  );
  expect(c.calls()).toBe(2);
  const t = gated.db.prepare(`SELECT state, attempts, error FROM transcriptions`).get();
  expect(t).toEqual({ state: 'failed', attempts: 1, error: 'sh exited 1: model not loaded' });
  expect(gated.db.prepare(`SELECT transcript FROM messages WHERE is_from_me = 0`).pluck().get()).toBe(0);
}, 60_000);

test('kill -9 of gated mid-transcription: after the restart the message is transcribed and answered once', async () => {
  const c = control('hang-once please check the weather tomorrow');
  const dir = tempDir();
  const e = gatedEnv(dir, { ...env(c.cmd), GATED_RUNTIME: 'process', GATED_IDLE_TIMEOUT_MS: '300' });
  const db = openDatabase(e.GATED_DB);
  addGroup(db, e.GATED_GROUPS_DIR, 'tg/voice', 'Voice');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'tg/voice')`).run();
  db.close();
  const before = api.sent.length;

  const first = await gatedUp(gatedRun(e));
  await api.waitForPoll();
  api.message({ chat, from: ada, text: '', file: { kind: 'voice', data: audio } });
  await until(() => existsSync(join(c.dir, 'hung')), 30_000, 'the transcriber started');
  first.kill('SIGKILL');
  await exited(first);
  // The command outlived gated (as an orphan would on a real machine); it is the test's to end.
  process.kill(Number(readFileSync(join(c.dir, 'hung'), 'utf8')), 'SIGKILL');
  const watch = new Database(e.GATED_DB, { readonly: true });
  expect(watch.prepare(`SELECT state FROM messages WHERE is_from_me = 0`).pluck().get()).toBe('transcribing');
  expect(api.sent.length).toBe(before);

  const second = await gatedUp(gatedRun(e));
  await api.waitForSent(before + 1);
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);
  expect(api.sent.slice(before).map((m) => m.text)).toEqual([
    expect.stringMatching(/^heard: please check the weather tomorrow \[transcript\] \[audio /),
  ]);
  expect(c.calls()).toBe(2);
  expect(watch.prepare(`SELECT state, attempts FROM transcriptions`).get()).toEqual({
    state: 'done',
    attempts: 0,
  });
  expect(
    watch.prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND kind = 'reply'`).pluck().get(),
  ).toBe(1);
  expect(watch.prepare(`SELECT state, transcript FROM messages WHERE is_from_me = 0`).get()).toEqual({
    state: 'done',
    transcript: 1,
  });
  watch.close();
}, 120_000);
