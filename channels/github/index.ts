import { Octokit } from '@octokit/rest';
import { Webhooks } from '@octokit/webhooks';
import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Jid } from '../../core/types.js';
import type { Channel, DraftOps, InboundSink, SendPart, WebhookHandler } from '../channel.js';
import { commentToInbound, type CommentPayload, type GithubSelf } from './map.js';
import { githubDrafts, reactGithub, sendGithubPart } from './send.js';

export { commentToInbound, githubJid, issueOf } from './map.js';
export { partKey, toDeliveryError } from './send.js';

/** What the GitHub channel needs. */
export interface GithubChannelOptions {
  /** A personal access token (classic `repo` scope, or fine-grained with Issues and Pull requests: write). */
  token: string;
  /** The secret the repository's (or organisation's) webhook signs deliveries with. */
  webhookSecret: string;
  /** The REST base (GITHUB_API_URL), default `https://api.github.com`. */
  apiUrl?: string;
  log: Logger;
}

/**
 * GitHub issues and pull requests as chats (`github:<owner>/<repo>#<number>`): comments that mention the
 * bot arrive as signed webhook deliveries at `/hooks/github` (@octokit/webhooks checks the HMAC before
 * anything is parsed), answers are comments made with @octokit/rest, drafts one comment edited in place.
 * Octokit's REST client retries nothing by itself here: delivery owns retries and rate-limit waits.
 */
export class GithubChannel implements Channel {
  readonly platform = 'github';
  // A comment body holds 65,536 characters; the rest is room for the part's idempotency marker.
  readonly limit = 65_000;
  readonly limitUnit = 'chars' as const;
  readonly textFormat = 'markdown' as const;
  readonly drafts: DraftOps;
  readonly webhook: WebhookHandler;
  private readonly octokit: Octokit;
  private readonly webhooks: Webhooks;
  private self: GithubSelf | undefined;
  private sink: InboundSink | undefined;

  constructor(private readonly opts: GithubChannelOptions) {
    const log = opts.log.child({ lib: 'octokit' });
    this.octokit = new Octokit({
      auth: opts.token,
      userAgent: 'gated',
      ...(opts.apiUrl ? { baseUrl: opts.apiUrl.replace(/\/$/, '') } : {}),
      log: {
        debug: (m: string) => log.debug(m),
        info: (m: string) => log.debug(m),
        warn: (m: string) => log.warn(m),
        error: (m: string) => log.error(m),
      },
    });
    this.drafts = githubDrafts(this.octokit);
    this.webhooks = new Webhooks({ secret: opts.webhookSecret });
    this.webhooks.on(['issue_comment.created', 'pull_request_review_comment.created'], (ev) => {
      // A throw here fails the delivery with 503, so it can be delivered again.
      const msg = commentToInbound(ev.payload as CommentPayload, this.self!);
      if (msg) this.sink!(msg);
    });
    this.webhook = (req) => this.receive(req);
  }

  /** The bot's login once started (the gateway strips `@login` prefixes with it). */
  get identity(): { username: string } | undefined {
    return this.self ? { username: this.self.login } : undefined;
  }

  /** Learns who the token belongs to (GET /user): a refused token fails the start. */
  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    const me = await this.octokit.rest.users.getAuthenticated();
    this.self = { login: me.data.login, id: me.data.id };
    this.opts.log.info({ bot: me.data.login }, 'github connected');
  }

  async stop(): Promise<void> {
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
    return sendGithubPart(this.octokit, this.self!, part);
  }

  async react(chatJid: Jid, messageId: string, emoji: string): Promise<void> {
    return reactGithub(this.octokit, chatJid, messageId, emoji);
  }
}
