import { readFileSync } from 'node:fs';
import type { Config } from '../core/config.js';
import { coerceError, UsageError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { chatAwaitsDecision } from '../store/approvals.js';
import { cloneUrlRecorder } from '../store/worktrees.js';
import type { Db } from '../store/db.js';
import type { Channel, InboundSink } from './channel.js';

/** What a channel factory may use. */
export interface ChannelDeps {
  db: Db;
  log: Logger;
}

/** Makes one platform's channel from the configuration, or says it is not configured. */
export interface ChannelFactory {
  /** The JID platform of the channel it makes. */
  platform: string;
  /** The settings that turn it on, for the "not started" log line (names only, never values). */
  settings: string;
  /**
   * The channel, or undefined when its credentials are absent. Async so a platform's client library is
   * imported only when that platform is configured: together they are most of an idle gated's memory.
   */
  create(config: Config, deps: ChannelDeps): Promise<Channel | undefined>;
}

/** Telegram: on when TELEGRAM_BOT_TOKEN is set; TELEGRAM_API_ROOT points it at another Bot API server. */
export const telegramFactory: ChannelFactory = {
  platform: 'telegram',
  settings: 'TELEGRAM_BOT_TOKEN',
  async create(config, { db, log }) {
    if (!config.telegram) return undefined;
    const { TelegramChannel } = await import('./telegram/index.js');
    return new TelegramChannel({
      token: config.telegram.token,
      apiRoot: config.telegram.apiRoot,
      db,
      log: log.child({ channel: 'telegram' }),
    });
  },
};

/** Discord: on when DISCORD_BOT_TOKEN is set; DISCORD_API_ROOT points it at another API server. */
export const discordFactory: ChannelFactory = {
  platform: 'discord',
  settings: 'DISCORD_BOT_TOKEN',
  async create(config, { log }) {
    if (!config.discord) return undefined;
    const { DiscordChannel } = await import('./discord/index.js');
    return new DiscordChannel({
      token: config.discord.token,
      apiRoot: config.discord.apiRoot,
      log: log.child({ channel: 'discord' }),
    });
  },
};

/** Bluesky: on when BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD are set (BLUESKY_SERVICE, BLUESKY_POLL_MS). */
export const blueskyFactory: ChannelFactory = {
  platform: 'bluesky',
  settings: 'BLUESKY_IDENTIFIER / BLUESKY_APP_PASSWORD',
  async create(config, { db, log }) {
    if (!config.bluesky) return undefined;
    const { createBlueskyChannel } = await import('./bluesky/index.js');
    const { pollMs, ...account } = config.bluesky;
    return createBlueskyChannel({ db, ...account, pollMs, log });
  },
};

/** Slack: on when SLACK_BOT_TOKEN and SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET are set. */
export const slackFactory: ChannelFactory = {
  platform: 'slack',
  settings: 'SLACK_BOT_TOKEN',
  async create(config, { log }) {
    if (!config.slack) return undefined;
    const { SlackChannel } = await import('./slack/index.js');
    const { apiUrl, ...rest } = config.slack;
    return new SlackChannel({ ...rest, ...(apiUrl ? { apiUrl } : {}), log: log.child({ channel: 'slack' }) });
  },
};

/**
 * GitHub: on when GITHUB_WEBHOOK_SECRET and GITHUB_TOKEN (or GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID and
 * GITHUB_APP_PRIVATE_KEY_FILE) are set; GITHUB_API_URL for another server. The App's key file is read here.
 */
export const githubFactory: ChannelFactory = {
  platform: 'github',
  settings: 'GITHUB_TOKEN or GITHUB_APP_* / GITHUB_WEBHOOK_SECRET',
  async create(config, { db, log }) {
    if (!config.github) return undefined;
    const { GithubChannel } = await import('./github/index.js');
    const { apiUrl, app, token, webhookSecret } = config.github;
    return new GithubChannel({
      ...(token ? { token } : {}),
      ...(app ? { app: { ...app, privateKey: readKeyFile(app.privateKeyFile) } } : {}),
      webhookSecret,
      ...(apiUrl ? { apiUrl } : {}),
      log: log.child({ channel: 'github' }),
      awaitsDecision: chatAwaitsDecision(db),
      repository: cloneUrlRecorder(db, 'github'),
    });
  },
};

/** The App's private key; a file that cannot be read stops gated with its name (never its contents). */
function readKeyFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`GITHUB_APP_PRIVATE_KEY_FILE cannot be read: ${coerceError(err).message}`);
  }
}

/** Email: on when EMAIL_ADDRESS and EMAIL_PASSWORD are set (with EMAIL_IMAP_HOST and EMAIL_SMTP_HOST). */
export const emailFactory: ChannelFactory = {
  platform: 'email',
  settings: 'EMAIL_ADDRESS / EMAIL_PASSWORD',
  async create(config, { db, log }) {
    if (!config.email) return undefined;
    const { EmailChannel } = await import('./email/index.js');
    return new EmailChannel({ config: config.email, db, log: log.child({ channel: 'email' }) });
  },
};

/** The platform channels gated makes from its configuration, in this order. */
const PLATFORMS: readonly ChannelFactory[] = [
  telegramFactory,
  discordFactory,
  blueskyFactory,
  slackFactory,
  githubFactory,
  emailFactory,
];

/**
 * The configured platform channels (not started): Telegram, Discord, Bluesky, Slack, GitHub and email (or `factories`:
 * tests pass their own; a platform named twice keeps its first factory). Logs, per platform, whether it
 * will start or why not; tokens never reach the log.
 */
export async function createChannels(
  config: Config,
  deps: ChannelDeps,
  factories: readonly ChannelFactory[] = PLATFORMS,
): Promise<Channel[]> {
  const channels: Channel[] = [];
  const seen = new Set<string>();
  for (const factory of factories) {
    if (seen.has(factory.platform)) continue;
    seen.add(factory.platform);
    const channel = await factory.create(config, deps);
    if (channel) {
      channels.push(channel);
      deps.log.info({ channel: factory.platform }, `${factory.platform} channel configured`);
    } else {
      deps.log.info(
        { channel: factory.platform },
        `${factory.platform} not started: ${factory.settings} not set`,
      );
    }
  }
  return channels;
}

/**
 * Starts each channel with the sink; a channel that fails to start (bad token, platform down) is logged
 * and left out so the others run. Returns the started ones: give exactly these to createDelivery, so rows
 * of a platform that is down stay pending instead of burning retries.
 */
export async function startChannels(channels: Channel[], sink: InboundSink, log: Logger): Promise<Channel[]> {
  const started: Channel[] = [];
  for (const ch of channels) {
    try {
      await ch.start(sink);
      started.push(ch);
      log.info({ channel: ch.platform }, 'channel started');
    } catch (err) {
      log.error({ channel: ch.platform, err: coerceError(err).message }, 'channel failed to start');
    }
  }
  return started;
}
