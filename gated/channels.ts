import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Channel } from '../gateway/channels/channel.js';
import type { Db } from '../gateway/store/db.js';

/**
 * The platform channels whose credentials are set. A platform without credentials is not started, and the
 * log says so (never with the token). Each platform's client library is imported only when it is
 * configured: together they are most of an idle gated's memory.
 */
export async function platformChannels(config: Config, db: Db, log: Logger): Promise<Channel[]> {
  const out: Channel[] = [];
  const skip = (platform: string, vars: string) =>
    log.info({ channel: platform }, `${platform} not started: ${vars} not set`);
  if (config.telegram) {
    const { TelegramChannel } = await import('../gateway/channels/telegram.js');
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
    const { createBlueskyChannel } = await import('../gateway/channels/bluesky/index.js');
    const { pollMs, ...account } = config.bluesky;
    out.push(createBlueskyChannel({ db, ...account, pollMs, log }));
  } else skip('bluesky', 'BLUESKY_IDENTIFIER / BLUESKY_APP_PASSWORD');
  if (config.discord) {
    const { DiscordChannel } = await import('../gateway/channels/discord.js');
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
