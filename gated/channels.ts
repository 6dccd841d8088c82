import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import { createBlueskyChannel } from '../gateway/channels/bluesky/index.js';
import type { Channel } from '../gateway/channels/channel.js';
import { DiscordChannel } from '../gateway/channels/discord.js';
import { TelegramChannel } from '../gateway/channels/telegram.js';
import type { Db } from '../gateway/store/db.js';

/**
 * The platform channels whose credentials are set. A platform without credentials is not started, and the
 * log says so (never with the token).
 */
export function platformChannels(config: Config, db: Db, log: Logger): Channel[] {
  const out: Channel[] = [];
  const skip = (platform: string, vars: string) =>
    log.info({ channel: platform }, `${platform} not started: ${vars} not set`);
  if (config.telegram) {
    out.push(
      new TelegramChannel({
        token: config.telegram.token,
        ...(config.telegram.apiRoot ? { apiRoot: config.telegram.apiRoot } : {}),
        db,
        log: log.child({ channel: 'telegram' }),
      }),
    );
  } else skip('telegram', 'TELEGRAM_BOT_TOKEN');
  if (config.bluesky) {
    out.push(createBlueskyChannel({ db, ...config.bluesky, log }));
  } else skip('bluesky', 'BLUESKY_IDENTIFIER / BLUESKY_APP_PASSWORD');
  if (config.discord) {
    out.push(
      new DiscordChannel({
        token: config.discord.token,
        ...(config.discord.apiRoot ? { apiRoot: config.discord.apiRoot } : {}),
        log: log.child({ channel: 'discord' }),
      }),
    );
  } else skip('discord', 'DISCORD_BOT_TOKEN');
  return out;
}
