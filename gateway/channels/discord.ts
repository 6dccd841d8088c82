import {
  Client,
  DiscordAPIError,
  Events,
  GatewayIntentBits,
  HTTPError,
  Partials,
  RateLimitError,
  REST,
  Routes,
  type Message,
} from 'discord.js';
import { coerceError, DeliveryError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { parseJid, type Jid, type NewInbound, type Verb } from '../../core/types.js';
import type { Channel, InboundSink, SendPart } from './channel.js';

/** What the Discord channel needs. */
export interface DiscordChannelOptions {
  token: string;
  /** REST base (DISCORD_API_ROOT), e.g. `http://127.0.0.1:PORT/api`; the gateway URL comes from it. */
  apiRoot?: string;
  log: Logger;
}

/**
 * The gateway intents the bot needs, each also switched on for the application in the developer portal
 * where marked privileged: Guilds (channel and thread cache), GuildMessages (messages in guild channels
 * and threads), MessageContent (privileged: the text of messages that do not mention the bot),
 * DirectMessages (DMs).
 */
export const DISCORD_INTENTS = [
  GatewayIntentBits.Guilds,
  GatewayIntentBits.GuildMessages,
  GatewayIntentBits.MessageContent,
  GatewayIntentBits.DirectMessages,
];

/** The JID of a Discord channel, thread or DM. */
export function discordJid(channelId: string): Jid {
  return `discord:${channelId}`;
}

/**
 * Discord through discord.js: guild text channels, threads and DMs, each `discord:<channel id>`. The
 * client (gateway websocket) receives; replies go through a separate REST client that hands rate limits and
 * 5xx back to delivery instead of retrying inside (delivery owns retries, and counts them on the row).
 */
export class DiscordChannel implements Channel {
  readonly platform = 'discord';
  readonly limit = 2000;
  readonly limitUnit = 'chars' as const;
  private client: Client | undefined;
  private readonly rest: REST;

  constructor(private readonly opts: DiscordChannelOptions) {
    const api = opts.apiRoot ? { api: opts.apiRoot } : {};
    this.rest = new REST({ ...api, retries: 0, rejectOnRateLimit: () => true }).setToken(opts.token);
  }

  async start(sink: InboundSink): Promise<void> {
    if (this.client) return;
    const client = new Client({
      intents: DISCORD_INTENTS,
      // DM channels are not cached before their first message; without this discord.js drops DMs.
      partials: [Partials.Channel],
      ...(this.opts.apiRoot ? { rest: { api: this.opts.apiRoot } } : {}),
    });
    client.on(Events.MessageCreate, (m) => {
      try {
        const msg = messageToInbound(m, client.user!.id, client.user!.username);
        if (msg) sink(msg);
      } catch (err) {
        this.opts.log.error({ message: m.id, err: coerceError(err).message }, 'discord message not stored');
      }
    });
    client.on(Events.Error, (err) => this.opts.log.warn({ err: err.message }, 'discord client error'));
    const ready = new Promise<void>((resolve) => client.once(Events.ClientReady, () => resolve()));
    try {
      await client.login(this.opts.token);
      await ready;
    } catch (err) {
      await client.destroy();
      throw err;
    }
    this.client = client;
    this.opts.log.info({ bot: client.user?.username, guilds: client.guilds.cache.size }, 'discord connected');
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.destroy();
  }

  async send(part: SendPart): Promise<string | null> {
    const room = roomOf(part.chatJid);
    const body = {
      content: part.text,
      // Agent text must never ping @everyone, @here or roles; users it names on purpose may be pinged.
      allowed_mentions: { parse: ['users'], replied_user: true },
      ...(part.part === 0 && part.replyTo
        ? { message_reference: { message_id: part.replyTo, fail_if_not_exists: false } }
        : {}),
    };
    try {
      const sent = (await this.rest.post(Routes.channelMessages(room), { body })) as { id: string };
      return sent.id;
    } catch (err) {
      throw toDeliveryError(err);
    }
  }

  async typing(chatJid: Jid, on: boolean): Promise<void> {
    if (!on) return; // The indicator ends by itself after ~10 s or with the next message.
    try {
      await this.rest.post(Routes.channelTyping(roomOf(chatJid)));
    } catch (err) {
      this.opts.log.debug({ chat: chatJid, err: coerceError(err).message }, 'discord typing failed');
    }
  }
}

function roomOf(chatJid: Jid): string {
  const { platform, room } = parseJid(chatJid);
  if (platform !== 'discord' || !/^\d+$/.test(room)) {
    throw new DeliveryError('permanent', `not a discord channel: ${chatJid}`);
  }
  return room;
}

/**
 * One Discord message as an inbound row, or null for bots (the bot itself included: no reply loops) and
 * system messages. An explicit `<@bot>` is a mention; a reply to one of the bot's messages is a reply. A
 * leading mention is removed (`<@bot> /ping` is a command) and others read `@name`.
 */
export function messageToInbound(m: Message, botId: string, botName: string): NewInbound | null {
  if (m.author.bot || m.system) return null;
  const tag = new RegExp(`<@!?${botId}>`, 'g');
  const mentioned = new RegExp(`<@!?${botId}>`).test(m.content);
  let verb: Verb = 'message';
  if (mentioned) verb = 'mention';
  else if (m.reference?.messageId && m.mentions.repliedUser?.id === botId) verb = 'reply';
  let content = m.content;
  if (mentioned) {
    const stripped = content
      .replace(new RegExp(`^\\s*<@!?${botId}>[\\s,:]*`), '')
      .replace(tag, `@${botName}`);
    content = stripped === '' ? content.replace(tag, `@${botName}`) : stripped;
  }
  if (content === '' && m.attachments.size > 0) {
    content = [...m.attachments.values()].map((a) => `[attachment: ${a.name}]`).join(' ');
  }
  return {
    chat_jid: discordJid(m.channelId),
    sender: m.author.id,
    sender_name: m.member?.displayName ?? m.author.globalName ?? m.author.username,
    verb,
    content,
    platform_msg_id: m.id,
    reply_to: m.reference?.messageId ?? null,
    timestamp: m.createdAt.toISOString(),
  };
}

/**
 * Sorts a failed REST call: a rate limit waits its retryAfter; 5xx, network errors and 401 (the
 * operator's token, not the reply, is at fault) are transient; other 4xx (403 missing access, 404 unknown
 * channel, 400 invalid body) are permanent.
 */
export function toDeliveryError(err: unknown): DeliveryError {
  if (err instanceof DeliveryError) return err;
  if (err instanceof RateLimitError) {
    const wait = err.retryAfter > 0 ? err.retryAfter : Math.max(err.timeToReset, 1000);
    return new DeliveryError('rate_limited', `429: rate limited on ${err.route}`, wait, 429);
  }
  if (err instanceof DiscordAPIError) {
    const msg = `${err.status} ${err.code}: ${err.message}`;
    if (err.status === 429) return new DeliveryError('rate_limited', msg, undefined, 429);
    if (err.status >= 500 || err.status === 401)
      return new DeliveryError('transient', msg, undefined, err.status);
    return new DeliveryError('permanent', msg, undefined, err.status);
  }
  if (err instanceof HTTPError)
    return new DeliveryError('transient', `${err.status}: ${err.message}`, undefined, err.status);
  return new DeliveryError('transient', coerceError(err).message);
}
