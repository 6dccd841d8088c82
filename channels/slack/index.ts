import { SocketModeClient } from '@slack/socket-mode';
import { LogLevel, WebClient, type Logger as SlackLogger } from '@slack/web-api';
import type { Sleep } from '../../core/backoff.js';
import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Jid } from '../../core/types.js';
import type {
  ApprovalOps,
  Channel,
  DraftOps,
  FetchedFile,
  InboundSink,
  SendFile,
  SendPart,
  WebhookHandler,
} from '../channel.js';
import { Connection } from '../connection.js';
import { RowChannel } from '../row-channel.js';
import { fetchCapped } from '../fetch.js';
import { slackApprovals } from './approvals.js';
import { handleSlackPayload, slackWebhook, type SlackInbound } from './events.js';
import type { SlackSelf } from './map.js';
import { platformError, reactSlack, sendSlackFile, sendSlackPart, slackDrafts } from './send.js';

export { eventToInbound, slackJid } from './map.js';
export { checkSlackSignature } from './events.js';
export { toDeliveryError } from './send.js';

/** What the Slack channel needs. */
export interface SlackChannelOptions {
  /** The bot token (`xoxb-…`): every Web API call and private file downloads. */
  botToken: string;
  /** The app-level token (`xapp-…`, scope `connections:write`): Socket Mode. Absent: HTTP only. */
  appToken?: string;
  /** The signing secret: the HTTP Events API at `/hooks/slack`. Absent: no webhook. */
  signingSecret?: string;
  /** The Web API base (SLACK_API_URL), default `https://slack.com/api/`. */
  apiUrl?: string;
  log: Logger;
  /** A Web API call without an answer after this many ms is aborted and retried by delivery. */
  sendTimeoutMs?: number;
  /** How the retries of a start that could not reach Slack wait (tests). */
  sleep?: Sleep;
}

/**
 * Slack through the official clients: @slack/web-api answers (posts, edits, uploads, reactions) and
 * @slack/socket-mode receives events over a WebSocket with no public URL; with a signing secret the HTTP
 * Events API at `/hooks/slack` receives them as well. Approvals get Block Kit buttons. Each channel,
 * private channel or DM is `slack:<channel id>`; a thread is a topic or part of the chat's session, as
 * the group chooses (registered_groups.threads). The Web client never retries by itself: delivery owns
 * retries, and 429's Retry-After comes back to it as a rate limit.
 *
 * No `typing`: Slack shows no typing indicator for bots in channels or DMs (the RTM API that had one is
 * gone for new apps), and `assistant.threads.setStatus` works only in the assistant threads of apps with
 * the AI-apps feature, which gated does not open. Streaming drafts (GATED_STREAM_CHANNELS) show progress.
 */
export class SlackChannel extends RowChannel implements Channel {
  readonly drafts: DraftOps;
  readonly approvals: ApprovalOps;
  readonly webhook: WebhookHandler | undefined;
  private readonly web: WebClient;
  private socket: SocketModeClient | undefined;
  private self: SlackSelf | undefined;
  private sink: InboundSink | undefined;
  private readonly apiOrigin: string;
  private readonly connection: Connection;

  constructor(private readonly opts: SlackChannelOptions) {
    super('slack');
    this.connection = new Connection({
      platform: 'slack',
      log: opts.log,
      refused: isTokenRefused,
      refusedWhat: 'the token',
      sleep: opts.sleep,
    });
    const apiUrl = opts.apiUrl ?? 'https://slack.com/api/';
    this.apiOrigin = new URL(apiUrl).origin;
    this.web = new WebClient(opts.botToken, {
      slackApiUrl: apiUrl,
      logger: slackLogger(opts.log),
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: opts.sendTimeoutMs ?? 15_000,
    });
    this.drafts = slackDrafts(this.web);
    this.approvals = slackApprovals(this.web);
    const inbound: SlackInbound = {
      sink: (m) => this.sink!(m),
      self: () => this.self,
      log: opts.log,
    };
    this.webhook = opts.signingSecret ? slackWebhook(opts.signingSecret, inbound) : undefined;
  }

  /** The bot's identity once started (the gateway strips `@name` prefixes with it). */
  get identity(): { username: string } | undefined {
    return this.self ? { username: this.self.name } : undefined;
  }

  /**
   * Learns who the bot is (auth.test: a refused token fails the start), then opens Socket Mode when an app
   * token is set; resolves once the socket said hello. A Slack that cannot be reached does not fail the
   * start: the channel keeps trying in the background (1 s doubling to 60 s). Until it knows who it is, HTTP
   * events are answered 503 (Slack sends them again) and sends go out as usual.
   */
  async start(sink: InboundSink): Promise<void> {
    if (this.connection.busy) return;
    this.sink = sink;
    await this.connection.open(() => this.hello());
  }

  private async hello(): Promise<void> {
    if (!this.self) {
      const me = await this.web.auth.test();
      if (!me.user_id) throw new Error('slack auth.test returned no user id');
      this.self = { userId: me.user_id, botId: me.bot_id ?? '', name: me.user ?? 'gated' };
      this.opts.log.info({ bot: this.self.name, team: me.team_id }, 'slack connected');
    }
    if (!this.opts.appToken || this.socket) return;
    const socket = new SocketModeClient({
      appToken: this.opts.appToken,
      logger: slackLogger(this.opts.log),
      clientOptions: {
        slackApiUrl: this.opts.apiUrl ?? 'https://slack.com/api/',
        retryConfig: { retries: 0 },
      },
    });
    socket.on('slack_event', (e: { ack: () => Promise<void>; type: string; body: unknown }) =>
      this.onEnvelope(e),
    );
    try {
      await socket.start();
    } catch (err) {
      await socket.disconnect().catch(() => undefined);
      throw err;
    }
    // stop() may have come while connecting; it waits for the retries, so closing here leaves nothing.
    if (this.connection.signal.aborted) await socket.disconnect();
    else this.socket = socket;
  }

  /** Stores the envelope's event, then acks it: unacked envelopes are delivered again by Slack. */
  private async onEnvelope(e: { ack: () => Promise<void>; type: string; body: unknown }): Promise<void> {
    if (e.type !== 'events_api' && e.type !== 'interactive') return;
    try {
      await handleSlackPayload(e.body, e.type, {
        sink: this.sink!,
        self: () => this.self,
        log: this.opts.log,
      });
      await e.ack();
    } catch (err) {
      this.opts.log.error({ err: coerceError(err).message }, 'slack event not stored; slack will retry');
    }
  }

  async stop(): Promise<void> {
    await this.connection.close();
    const socket = this.socket;
    this.socket = undefined;
    await socket?.disconnect();
  }

  async send(part: SendPart): Promise<string | null> {
    return sendSlackPart(this.web, part);
  }

  async sendFile(file: SendFile): Promise<string | null> {
    return sendSlackFile(this.web, file);
  }

  /**
   * Downloads a shared file from its private URL with the bot token. The token goes only to Slack's file
   * host (or the configured API server's origin): a URL anywhere else is refused rather than handed it.
   */
  async fetchAttachment(source: string, maxBytes: number): Promise<FetchedFile> {
    const origin = new URL(source).origin;
    if (origin !== 'https://files.slack.com' && origin !== this.apiOrigin) {
      throw new Error(`slack file outside files.slack.com: ${origin}`);
    }
    return fetchCapped(source, maxBytes, { headers: { Authorization: `Bearer ${this.opts.botToken}` } });
  }

  async react(chatJid: Jid, messageId: string, emoji: string): Promise<void> {
    return reactSlack(this.web, chatJid, messageId, emoji);
  }
}

// auth.test answers that no retry can help with: the operator must fix the token.
const TOKEN_REFUSALS = new Set([
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'user_removed_from_team',
  'team_disabled',
]);

/** True when Slack refused the token itself (an `ok:false` answer), not when it could not be reached. */
function isTokenRefused(err: unknown): boolean {
  return TOKEN_REFUSALS.has(platformError(err) ?? '');
}

/** The Slack clients' logger on top of gated's: their lines at debug, warnings and errors as such. */
function slackLogger(log: Logger): SlackLogger {
  const child = log.child({ lib: 'slack' });
  const line = (args: unknown[]) => args.map((a) => (typeof a === 'string' ? a : String(a))).join(' ');
  return {
    debug: (...a: unknown[]) => child.debug(line(a)),
    info: (...a: unknown[]) => child.debug(line(a)),
    warn: (...a: unknown[]) => child.warn(line(a)),
    error: (...a: unknown[]) => child.error(line(a)),
    setLevel: () => undefined,
    getLevel: () => LogLevel.INFO,
    setName: () => undefined,
  };
}
