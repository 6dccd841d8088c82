import { PassThrough } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { DiscordChannel } from '../../channels/discord/index.js';
import { LocalChannel } from '../../channels/local/index.js';
import { createChannels, startChannels, type ChannelFactory } from '../../channels/registry.js';
import { TelegramChannel } from '../../channels/telegram/index.js';
import { freshDb } from '../helpers/db.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { cleanupAfterEach } from './support.js';

/** A logger whose lines the test reads. */
function capture() {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
  return { log, text: () => lines.join('') };
}

const defer = cleanupAfterEach();

describe('createChannels', () => {
  it('makes only the channels whose credentials are set and says why the others are off', async () => {
    const { db } = freshDb();
    const none = capture();
    expect(await createChannels(loadConfig({}), { db, log: none.log })).toEqual([]);
    expect(none.text()).toContain('telegram not started: TELEGRAM_BOT_TOKEN not set');
    expect(none.text()).toContain('discord not started: DISCORD_BOT_TOKEN not set');
    expect(none.text()).toContain('bluesky not started: BLUESKY_IDENTIFIER / BLUESKY_APP_PASSWORD not set');

    const both = capture();
    const env = {
      TELEGRAM_BOT_TOKEN: '42:very-secret',
      DISCORD_BOT_TOKEN: 'also-secret',
      TELEGRAM_API_ROOT: 'http://127.0.0.1:1',
    };
    const channels = await createChannels(loadConfig(env), { db, log: both.log });
    expect(channels.map((c) => c.constructor)).toEqual([TelegramChannel, DiscordChannel]);
    expect(both.text()).toContain('telegram channel configured');
    expect(both.text()).not.toContain('secret');
  });

  it('makes the given factories in order, the first factory of a platform wins', async () => {
    const { db } = freshDb();
    const made: string[] = [];
    const factory = (platform: string, on: boolean): ChannelFactory => ({
      platform,
      settings: `${platform.toUpperCase()}_SETTING`,
      create: async () => {
        made.push(platform);
        return on
          ? new LocalChannel({ folder: platform, input: new PassThrough(), output: new PassThrough() })
          : undefined;
      },
    });
    const { log, text } = capture();
    const factories = [factory('web', true), factory('matrix', false), factory('web', true)];
    const channels = await createChannels(loadConfig({}), { db, log }, factories);
    expect(channels).toHaveLength(1);
    expect(made).toEqual(['web', 'matrix']);
    expect(text()).toContain('matrix not started: MATRIX_SETTING not set');
  });
});

describe('startChannels', () => {
  it('starts what can start and leaves out, with a log line, what cannot', async () => {
    const api = await TelegramApiServer.start('1:right');
    defer(() => api.close());
    const { db } = freshDb();
    const { log, text } = capture();
    const badTelegram = new TelegramChannel({ token: '1:wrong', apiRoot: api.url, db, log });
    const local = new LocalChannel({ folder: 'demo', input: new PassThrough(), output: new PassThrough() });
    const started = await startChannels([badTelegram, local], () => null, log);
    defer(() => local.stop());
    expect(started).toEqual([local]);
    expect(text()).toContain('channel failed to start');
    expect(text()).not.toContain('1:wrong');
  });
});
