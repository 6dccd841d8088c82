import {
  Client,
  Events,
  GatewayIntentBits,
  Partials,
  REST,
  Routes,
  type ButtonInteraction,
} from 'discord.js';
import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Jid } from '../../core/types.js';
import type { Sleep } from '../../core/backoff.js';
import type {
  ApprovalOps,
  Channel,
  DraftOps,
  FetchedFile,
  InboundSink,
  SendFile,
  SendPart,
} from '../channel.js';
import { Connection } from '../connection.js';
import { RowChannel } from '../row-channel.js';
import { buttonToInbound, discordApprovals } from './buttons.js';
import { discordDrafts } from './drafts.js';
import { fetchDiscordFile, sendDiscordFile } from './files.js';
import { messageToInbound } from './map.js';
import { reactDiscord, roomOf, sendDiscordPart } from './send.js';

export { discordJid, messageToInbound } from './map.js';
export { toDeliveryError } from './send.js';

/** What the Discord channel needs. */
export interface DiscordChannelOptions {
  token: string;
  /** REST base (DISCORD_API_ROOT), e.g. `http://127.0.0.1:PORT/api`; the gateway URL comes from it. */
  apiRoot?: string;
  log: Logger;
  /** Waits between connection attempts (tests inject it). */
  sleep?: Sleep;
  /** A REST call without an answer after this many ms is aborted and retried by delivery. Default 15000. */
  sendTimeoutMs?: number;
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

/**
 * Discord through discord.js: guild text channels, threads and DMs, each `discord:<channel id>`. The
 * client (gateway websocket) receives; replies go through a separate REST client that hands rate limits and
 * 5xx back to delivery instead of retrying inside (delivery owns retries, and counts them on the row).
 */
export class DiscordChannel extends RowChannel implements Channel {
  private client: Client | undefined;
  private readonly rest: REST;
  readonly drafts: DraftOps;
  readonly approvals: ApprovalOps;
  private readonly connection: Connection;

  constructor(private readonly opts: DiscordChannelOptions) {
    super('discord');
    const api = opts.apiRoot ? { api: opts.apiRoot } : {};
    this.rest = new REST({
      ...api,
      retries: 0,
      rejectOnRateLimit: () => true,
      timeout: opts.sendTimeoutMs ?? 15_000,
    }).setToken(opts.token);
    this.drafts = discordDrafts(this.rest);
    this.approvals = discordApprovals(this.rest);
    this.connection = new Connection({
      platform: 'discord',
      log: opts.log,
      refused: isFatal,
      refusedWhat: 'the bot',
      sleep: opts.sleep,
    });
  }

  /**
   * Connects and resolves once the guilds are loaded. A refused token or intent fails the start; an
   * unreachable API does not: the channel keeps trying in the background (sends work meanwhile, over REST).
   */
  async start(sink: InboundSink): Promise<void> {
    if (this.client || this.connection.busy) return;
    await this.connection.open(async () => {
      const client = await this.connect(sink);
      // stop() may have come while connecting; it waits for the retries, so closing here leaves nothing.
      if (this.connection.signal.aborted) await client.destroy();
      else this.client = client;
    });
  }

  private async connect(sink: InboundSink): Promise<Client> {
    const client = new Client({
      intents: DISCORD_INTENTS,
      // DM channels are not cached before their first message; without this discord.js drops DMs.
      partials: [Partials.Channel],
      ...(this.opts.apiRoot ? { rest: { api: this.opts.apiRoot } } : {}),
    });
    // The sink is called before any await of the handler: rows keep the order their events came in.
    client.on(Events.MessageCreate, async (m) => {
      try {
        const msg = messageToInbound(m, client.user!.id, client.user!.username);
        if (msg) await sink(msg);
      } catch (err) {
        this.opts.log.error({ message: m.id, err: coerceError(err).message }, 'discord message not stored');
      }
    });
    client.on(Events.InteractionCreate, async (i) => {
      if (i.isButton()) await this.pressed(i, sink);
    });
    client.on(Events.Error, (err) => this.opts.log.warn({ err: err.message }, 'discord client error'));
    // A gateway that closes for good (bad token, intents not enabled) never sends READY, and login's error
    // does not say why: the close code does.
    let closedWith: number | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      client.once(Events.ClientReady, () => resolve());
      client.once(Events.ShardDisconnect, (ev) => {
        closedWith = ev.code;
        reject(new DiscordGatewayClosed(ev.code));
      });
    });
    ready.catch(() => undefined); // login usually fails first; its rejection is reported below
    try {
      await client.login(this.opts.token);
      await ready;
    } catch (err) {
      await client.destroy();
      throw closedWith === undefined ? err : new DiscordGatewayClosed(closedWith);
    }
    this.opts.log.info({ bot: client.user?.username, guilds: client.guilds.cache.size }, 'discord connected');
    return client;
  }

  /**
   * A button press: stored as a `button` row, then acknowledged with a deferred update (Discord wants an
   * answer within 3 s; the row, not the answer, is what counts). Components that are not ours are left alone.
   */
  private async pressed(i: ButtonInteraction, sink: InboundSink): Promise<void> {
    let msg;
    try {
      msg = buttonToInbound(i);
      if (msg) await sink(msg);
    } catch (err) {
      this.opts.log.error({ interaction: i.id, err: coerceError(err).message }, 'discord press not stored');
      return;
    }
    if (!msg) return;
    i.deferUpdate().catch((err: unknown) =>
      this.opts.log.debug(
        { interaction: i.id, err: coerceError(err).message },
        'discord press not acknowledged',
      ),
    );
  }

  async stop(): Promise<void> {
    await this.connection.close();
    const client = this.client;
    this.client = undefined;
    await client?.destroy();
  }

  async send(part: SendPart): Promise<string | null> {
    return sendDiscordPart(this.rest, part);
  }

  async sendFile(file: SendFile): Promise<string | null> {
    return sendDiscordFile(this.rest, file);
  }

  async fetchAttachment(source: string, maxBytes: number): Promise<FetchedFile> {
    return fetchDiscordFile(source, maxBytes);
  }

  async react(chatJid: Jid, messageId: string, emoji: string): Promise<void> {
    return reactDiscord(this.rest, chatJid, messageId, emoji);
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

/** The gateway closed the connection with a code discord.js will not reconnect after. */
export class DiscordGatewayClosed extends Error {
  override readonly name = 'DiscordGatewayClosed';
  constructor(readonly closeCode: number) {
    super(`discord gateway closed the connection (${closeCode})`);
  }
}

// Authentication failed, invalid shard, sharding required, invalid API version, invalid or disallowed intents.
const FATAL_CLOSE_CODES = new Set([4004, 4010, 4011, 4012, 4013, 4014]);
const FATAL_ERROR_CODES = new Set(['TokenInvalid', 'InvalidIntents', 'DisallowedIntents']);

/** True when retrying cannot help: the operator must fix the token or the application's intents. */
function isFatal(err: unknown): boolean {
  if (err instanceof DiscordGatewayClosed) return FATAL_CLOSE_CODES.has(err.closeCode);
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && FATAL_ERROR_CODES.has(code);
}
