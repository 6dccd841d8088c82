import { Octokit } from '@octokit/rest';
import { Webhooks } from '@octokit/webhooks';
import type { Sleep } from '../../core/backoff.js';
import { coerceError, DeliveryError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Jid } from '../../core/types.js';
import type { Channel, DraftOps, InboundSink, SendPart, WebhookHandler } from '../channel.js';
import { Connection } from '../connection.js';
import { RowChannel } from '../row-channel.js';
import { GithubAppRefused, InstallationTokens, type GithubAppKey } from './app-auth.js';
import {
  closeToInbound,
  commentToInbound,
  type ClosePayload,
  type CommentPayload,
  type GithubSelf,
} from './map.js';
import { githubDrafts, reactGithub, sendGithubPart } from './send.js';

export { commentToInbound, githubJid, issueOf } from './map.js';
export { partKey, toDeliveryError } from './send.js';
export { appJwt, InstallationTokens, type GithubAppKey } from './app-auth.js';

/** What the GitHub channel needs. */
export interface GithubChannelOptions {
  /** A personal access token (classic `repo` scope, or fine-grained with Issues and Pull requests: write). */
  token?: string;
  /** Or a GitHub App installation: gated mints its installation tokens (exactly one of token and app). */
  app?: GithubAppKey;
  /** The secret the repository's (or organisation's) webhook signs deliveries with. */
  webhookSecret: string;
  /** The REST base (GITHUB_API_URL), default `https://api.github.com`. */
  apiUrl?: string;
  log: Logger;
  /** How the retries of a start that could not reach GitHub wait (tests). */
  sleep?: Sleep;
  /**
   * True when gated asked something on the chat (a pending tool approval, an open pairing code): there a
   * `/approve CODE` or `/reject CODE` comment is read without a mention of the bot.
   */
  awaitsDecision?: (chatJid: Jid) => boolean;
  /** Told each repository a delivery names (`owner/name`) and the URL it is cloned from. */
  repository?: (fullName: string, cloneUrl: string) => void;
}

/**
 * GitHub issues and pull requests as chats (`github:<owner>/<repo>#<number>`): comments that mention the
 * bot arrive as signed webhook deliveries at `/hooks/github` (@octokit/webhooks checks the HMAC before
 * anything is parsed), answers are comments made with @octokit/rest, drafts one comment edited in place.
 * Octokit's REST client retries nothing by itself here: delivery owns retries and rate-limit waits.
 */
export class GithubChannel extends RowChannel implements Channel {
  readonly drafts: DraftOps;
  readonly webhook: WebhookHandler;
  private readonly octokit: Octokit;
  private readonly webhooks: Webhooks;
  private self: GithubSelf | undefined;
  private sink: InboundSink | undefined;
  /** The App's installation tokens, when gated answers as an App. */
  readonly tokens: InstallationTokens | undefined;
  private readonly connection: Connection;

  constructor(private readonly opts: GithubChannelOptions) {
    super('github');
    this.connection = new Connection({
      platform: 'github',
      log: opts.log,
      refused: isRefused,
      refusedWhat: 'the credentials',
      sleep: opts.sleep,
    });
    const log = opts.log.child({ lib: 'octokit' });
    if (!opts.token === !opts.app) throw new Error('github needs a token or an app, not both');
    this.tokens = opts.app
      ? new InstallationTokens({
          app: opts.app,
          log: opts.log,
          ...(opts.apiUrl ? { apiUrl: opts.apiUrl } : {}),
        })
      : undefined;
    this.octokit = new Octokit({
      ...(opts.token ? { auth: opts.token } : {}),
      userAgent: 'gated',
      ...(opts.apiUrl ? { baseUrl: opts.apiUrl.replace(/\/$/, '') } : {}),
      log: {
        debug: (m: string) => log.debug(m),
        info: (m: string) => log.debug(m),
        warn: (m: string) => log.warn(m),
        error: (m: string) => log.error(m),
      },
    });
    if (this.tokens) useInstallationTokens(this.octokit, this.tokens);
    this.drafts = githubDrafts(this.octokit);
    this.webhooks = new Webhooks({ secret: opts.webhookSecret });
    this.webhooks.on(['issue_comment.created', 'pull_request_review_comment.created'], async (ev) => {
      // A throw here fails the delivery with 503, so it can be delivered again; `receive` awaits it.
      const msg = commentToInbound(ev.payload as CommentPayload, this.self!, opts.awaitsDecision);
      if (msg) await this.sink!(msg);
    });
    this.webhooks.on(['issues.closed', 'pull_request.closed'], async (ev) => {
      const msg = closeToInbound(ev.payload as ClosePayload);
      if (msg) await this.sink!(msg);
    });
    this.webhooks.onAny((ev) => {
      // Where each repository is cloned from, for groups bound to their GitHub repository (docs/WORKTREES.md).
      const repo = (ev.payload as { repository?: { full_name?: string; clone_url?: string } }).repository;
      if (repo?.full_name && repo.clone_url) opts.repository?.(repo.full_name, repo.clone_url);
    });
    this.webhook = (req) => this.receive(req);
  }

  /** The bot's login once started (the gateway strips `@login` prefixes with it). */
  get identity(): { username: string } | undefined {
    return this.self ? { username: this.self.login } : undefined;
  }

  /**
   * Learns who the bot is: the token's user (GET /user), or the App's `<slug>[bot]` user. Refused credentials
   * fail the start; a GitHub that cannot be reached does not: the channel keeps asking in the background
   * (1 s doubling to 60 s), and answers deliveries 503 and holds its sends until it knows.
   */
  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    if (this.self || this.connection.busy) return;
    await this.connection.open(() => this.hello());
  }

  private async hello(): Promise<void> {
    if (this.tokens) {
      const slug = await this.tokens.slug();
      const bot = await this.octokit.rest.users.getByUsername({ username: `${slug}[bot]` });
      // People mention an App by its slug; its comments are by the `<slug>[bot]` user.
      this.self = { login: slug, id: bot.data.id };
    } else {
      const me = await this.octokit.rest.users.getAuthenticated();
      this.self = { login: me.data.login, id: me.data.id };
    }
    this.opts.log.info({ bot: this.self.login, app: this.tokens !== undefined }, 'github connected');
  }

  async stop(): Promise<void> {
    await this.connection.close();
    this.sink = undefined;
  }

  /**
   * One webhook delivery. The signature (`X-Hub-Signature-256`) is verified on the raw body first: a
   * missing or wrong one is 401 and nothing is parsed or stored. The comment is stored before the 2xx.
   */
  private async receive(req: Request): Promise<Response> {
    if (req.method !== 'POST') return new Response('method not allowed', { status: 405 });
    const raw = await req.text();
    const signature = req.headers.get('x-hub-signature-256') ?? '';
    const id = req.headers.get('x-github-delivery') ?? '';
    const name = req.headers.get('x-github-event') ?? '';
    const valid = signature !== '' && (await this.webhooks.verify(raw, signature).catch(() => false));
    if (!valid) {
      this.opts.log.warn({ delivery: id, event: name }, 'github delivery refused: bad signature');
      return Response.json({ error: 'bad signature' }, { status: 401 });
    }
    if (!this.self || !this.sink) return Response.json({ error: 'not started' }, { status: 503 });
    let payload: unknown;
    try {
      payload = JSON.parse(raw);
    } catch {
      return Response.json({ error: 'body is not JSON' }, { status: 400 });
    }
    try {
      await this.webhooks.receive({ id, name, payload } as Parameters<Webhooks['receive']>[0]);
    } catch (err) {
      this.opts.log.error({ delivery: id, err: coerceError(err).message }, 'github delivery not stored');
      return Response.json({ error: 'not stored' }, { status: 503 });
    }
    return new Response(null, { status: 204 });
  }

  async send(part: SendPart): Promise<string | null> {
    // The bot's id finds a part posted before a crash; without it nothing is sent yet.
    if (!this.self) throw new DeliveryError('transient', 'github not connected yet');
    return sendGithubPart(this.octokit, this.self, part);
  }

  async react(chatJid: Jid, messageId: string, emoji: string): Promise<void> {
    return reactGithub(this.octokit, chatJid, messageId, emoji);
  }
}

/**
 * Every request of `octokit` carries a current installation token; a 401 drops that token, so the retry
 * delivery makes mints a fresh one.
 */
function useInstallationTokens(octokit: Octokit, tokens: InstallationTokens): void {
  octokit.hook.before('request', async (options) => {
    options.headers.authorization = `token ${await tokens.token()}`;
  });
  octokit.hook.error('request', (err) => {
    // Octokit redacts the header in its errors: the token in use is the one dropped (at worst one extra mint).
    if ((err as { status?: number }).status === 401) tokens.invalidate();
    throw err;
  });
}

/** Credentials GitHub refused (401, 403 on GET /user, the App's key or installation): retrying cannot help. */
function isRefused(err: unknown): boolean {
  if (err instanceof GithubAppRefused) return true;
  const status = (err as { status?: unknown } | null)?.status;
  return status === 401 || status === 403;
}
