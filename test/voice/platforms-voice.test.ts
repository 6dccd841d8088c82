/**
 * Voice on Discord, Slack and email, end to end on real parts (docs/VOICE.md): the whole gateway with the
 * platform's real client against its local server (test/infra/discord-api.ts, slack-api.ts, and the real
 * Dovecot and Postfix of test/infra/mail.ts). An audio file of espeak-ng's speech a user attaches is
 * transcribed by the real pocketsphinx and the agent reads the words, marked as a transcript, with the
 * audio attached; in a group whose voice.json says `"speak": true` the reply also arrives as an Ogg/Opus
 * audio file of real speech that pocketsphinx hears the words in.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { pocketsphinxTranscriber } from '../../voice/transcribers.js';
import { tempDir } from '../helpers/db.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { writeGroupFile } from '../helpers/group-config.js';
import { until } from '../helpers/process.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { BOT, emailEnv, startMailWorld, type MailWorld } from '../infra/mail.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { startE2eGated } from '../channels/e2e.js';
import { KEY_WORDS, voiceNote } from './speech.js';

const VOICE_AGENT_CMD = 'node "$GATED_HOME/test/agents/voice-agent.mjs"';
const SAY = 'say please check the weather tomorrow';

let note: Buffer;
let gated: Gated | undefined;

beforeAll(async () => {
  note = await voiceNote();
}, 60_000);

/** The whole gateway for `platform`, transcribing with pocketsphinx, its group speaking its replies. */
async function start(platform: string, env: Record<string, string>): Promise<Gated> {
  const folder = `${platform.slice(0, 2)}/voice`;
  gated = await startE2eGated(
    {
      GATED_AGENT_CMD: VOICE_AGENT_CMD,
      GATED_TRANSCRIBE_CMD: 'pocketsphinx',
      GATED_CONFIG_DIR: join(tempDir(), 'config'),
      ...env,
    },
    { groups: [[folder, 'Voice']], routes: [[0, `platform=${platform}`, folder]] },
  );
  writeGroupFile(gated.config.configDir, folder, 'voice.json', JSON.stringify({ speak: true }));
  return gated;
}

/** What pocketsphinx hears in an audio file's bytes. */
async function heard(data: Buffer): Promise<string> {
  const dir = tempDir();
  const file = join(dir, 'reply.ogg');
  writeFileSync(file, data);
  return pocketsphinxTranscriber(async () => dir).transcribe({
    file,
    mime: 'audio/ogg',
    language: undefined,
    timeoutMs: 120_000,
  });
}

/** The transcribed row of the user's audio, as stored. */
const audioRow = (g: Gated) =>
  g.db
    .prepare(
      `SELECT m.content, m.transcript, m.state, t.state AS transcription FROM messages m
       JOIN transcriptions t ON t.message_id = m.id WHERE m.is_from_me = 0`,
    )
    .get() as { content: string; transcript: number; state: string; transcription: string };

const TRANSCRIBED = /^heard: .*weather.* \[transcript\] \[audio inbox\/\d+\/0-memo\.ogg\]$/;

function expectTranscribed(g: Gated): void {
  const row = audioRow(g);
  for (const w of KEY_WORDS) expect(row.content).toContain(w);
  expect(row).toMatchObject({ transcript: 1, state: 'done', transcription: 'done' });
}

async function expectSpeech(data: Buffer): Promise<void> {
  expect(data.subarray(0, 4).toString()).toBe('OggS');
  const words = await heard(data);
  for (const w of KEY_WORDS) expect(words).toContain(w);
}

describe('Discord', () => {
  let api: DiscordApiServer;
  const ada = { id: '700000000000000042', username: 'ada', global_name: 'Ada' };

  test('an audio attachment is transcribed; a spoken reply is an audio file of the message', async () => {
    api = closedAfterGateds(await DiscordApiServer.start());
    const g = await start('discord', { DISCORD_BOT_TOKEN: api.token, DISCORD_API_ROOT: api.apiRoot });
    await api.waitForIdentify();
    api.push({
      channelId: api.textChannelId,
      author: ada,
      content: '',
      attachments: [{ name: 'memo.ogg', data: note, contentType: 'audio/ogg' }],
    });
    // The text, then the spoken reply as a message with the file.
    const [text, spoken] = await api.waitForPosted(2);
    expect(text!.content).toMatch(TRANSCRIBED);
    expectTranscribed(g);
    expect(spoken!.attachments.map((a) => [a.name, a.contentType])).toEqual([['reply.ogg', 'audio/ogg']]);

    api.push({ channelId: api.textChannelId, author: ada, content: SAY });
    const [, , said, voice] = await api.waitForPosted(4);
    expect(said!.content).toBe('please check the weather tomorrow');
    await expectSpeech(voice!.attachments[0]!.data);
  }, 240_000);
});

describe('Slack', () => {
  let api: SlackApiServer;

  test('an audio file shared is transcribed; a spoken reply is a file shared after the text', async () => {
    api = closedAfterGateds(await SlackApiServer.start());
    const g = await start('slack', {
      SLACK_BOT_TOKEN: api.botToken,
      SLACK_APP_TOKEN: api.appToken,
      SLACK_API_URL: api.apiUrl,
    });
    await api.waitConnected();
    const push = (ev: Record<string, unknown>) => api.waitAck(api.pushEvent(api.callback(ev)));
    await push(
      api.messageEvent({
        channel: api.channelId,
        user: 'U0ADA001',
        text: '',
        files: [{ name: 'memo.ogg', data: note, mimetype: 'audio/ogg' }],
      }),
    );
    await until(() => api.posted.some((p) => p.files.length > 0), 180_000, 'the spoken reply');
    expect(api.posted.find((p) => p.files.length === 0)!.text).toMatch(TRANSCRIBED);
    expectTranscribed(g);

    await push(api.messageEvent({ channel: api.channelId, user: 'U0ADA001', text: SAY }));
    await until(() => api.posted.filter((p) => p.files.length > 0).length === 2, 180_000, 'the second');
    expect(api.posted.filter((p) => p.files.length === 0).map((p) => p.text)[1]).toBe(
      'please check the weather tomorrow',
    );
    const file = api.posted.filter((p) => p.files.length > 0)[1]!.files[0]!;
    expect(file.name).toBe('reply.ogg');
    await expectSpeech(file.data);
  }, 240_000);
});

describe('email', () => {
  const ALICE = 'alice@example.test';
  let world: MailWorld;
  beforeAll(async () => {
    world = await startMailWorld([ALICE]);
  }, 60_000);
  afterAll(() => world?.stop());

  test('an audio attachment is transcribed; a spoken reply is attached to a mail of its own', async () => {
    const from = await world.nextUid(ALICE);
    const g = await start('email', emailEnv(world));
    await world.send(ALICE, {
      to: BOT.address,
      subject: 'memo',
      text: '',
      attachments: [{ filename: 'memo.ogg', content: note, contentType: 'audio/ogg' }],
    });
    const mails = async () => {
      await world.settled();
      return world.inbox(ALICE, from - 1);
    };
    const got = await until(async () => ((await mails()).length >= 2 ? mails() : undefined), 180_000, 'mail');
    // The subject leads the first mail of a thread, as the user's caption; the words follow.
    expect(got[0]!.mail.text!.trim()).toMatch(/^heard: Subject: memo\n\n.*weather.* \[transcript\] \[audio /);
    expectTranscribed(g);
    const [audio] = got[1]!.mail.attachments;
    expect(audio).toMatchObject({ filename: 'reply.ogg', contentType: 'audio/ogg' });
    expect(audio!.content.subarray(0, 4).toString()).toBe('OggS');
  }, 240_000);
});
