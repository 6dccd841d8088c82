/**
 * A small GitHub on 127.0.0.1 for tests, speaking what @octokit/rest and GitHub's webhooks use:
 * - REST: `GET /user`, `GET /users/{login}`; issue comments listed (`since`, `per_page`), created, edited, deleted; reactions on
 *   comments. Token in `Authorization` (401 `Bad credentials` otherwise). Every answer carries the
 *   `x-ratelimit-*` headers. The next comment writes can be made to answer 429 with `Retry-After`, 403 as
 *   a secondary rate limit (`Retry-After`) or as an exhausted primary limit (`x-ratelimit-remaining: 0` and
 *   `x-ratelimit-reset`), 403 forbidden, or 502; or to store the comment and never answer (a crash window).
 *   `installApp` adds a GitHub App whose installation tokens work beside the personal token
 *   (test/infra/github-app.ts).
 * - Comments carry the commenter's `author_association` (`associations`, NONE unless set).
 * - Webhook deliveries: `deliver` POSTs a payload to gated signed as GitHub signs it
 *   (`X-Hub-Signature-256: sha256=<HMAC of the raw body>`), with `X-GitHub-Event` and `X-GitHub-Delivery`;
 *   `redeliver` sends one again with the same delivery id, as the "Redeliver" button does.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { GithubAppAuthority } from './github-app.js';
import { listenLoopback, type Loopback } from './loopback.js';

/** A user or bot account. */
export interface GithubUser {
  login: string;
  id: number;
  type: 'User' | 'Bot';
}

/** One issue comment as stored (and as the API returns it, with `user`). */
export interface GithubComment {
  id: number;
  owner: string;
  repo: string;
  number: number;
  body: string;
  user: GithubUser;
  created_at: string;
  updated_at: string;
  deleted: boolean;
  /** Every body the comment had after its first, oldest first. */
  edits: string[];
  reactions: string[];
}

/** What the next comment writes answer with. */
export type GithubFault =
  | { kind: 'rate_limited'; retryAfterS: number }
  | { kind: 'secondary'; retryAfterS: number }
  | { kind: 'primary'; resetInS: number }
  | { kind: 'forbidden' }
  | { kind: 'server_error' }
  | { kind: 'hang' };

/** A webhook delivery as sent. */
export interface Delivery {
  id: string;
  event: string;
  body: string;
}

type Json = Record<string, unknown>;

/** Where deliveries go: a URL, or a webhook handler called directly. */
export type HookTarget = string | ((req: Request) => Promise<Response>);

/** The GitHub server. */
export class GithubApiServer {
  readonly token = 'ghp_testtoken0000000000000000000000000';
  readonly bot: GithubUser = { login: 'gated-bot', id: 9001, type: 'User' };
  readonly comments: GithubComment[] = [];
  /** Each user's standing in the repositories (`author_association`): OWNER, COLLABORATOR…; else NONE. */
  readonly associations = new Map<number, string>();
  readonly deliveries: Delivery[] = [];
  /** Comment writes (POST / PATCH / DELETE) the server received, in order, for counting. */
  readonly writes: Array<{ method: string; path: string }> = [];
  /** The GitHub App installed here, once `installApp` made it (test/infra/github-app.ts). */
  app: GithubAppAuthority | undefined;
  private faults: GithubFault[] = [];
  private nextId = 5000;
  private clock = 0;

  private constructor(private readonly loop: Loopback) {}

  /** Starts on a free loopback port, or on `port`. */
  static async start(port = 0): Promise<GithubApiServer> {
    const ref: { self?: GithubApiServer } = {};
    const server = createServer((req, res) => void ref.self!.handle(req, res));
    ref.self = new GithubApiServer(await listenLoopback(server, port));
    return ref.self;
  }

  /** Installs a GitHub App: its JWTs mint installation tokens, accepted beside the personal token. */
  installApp(): GithubAppAuthority {
    this.app ??= new GithubAppAuthority();
    return this.app;
  }

  /** The REST base URL Octokit takes as `baseUrl`. */
  get url(): string {
    return `http://127.0.0.1:${this.loop.port}`;
  }

  /** The next `n` comment writes answer with `fault`. */
  failNext(fault: GithubFault, n = 1): void {
    for (let i = 0; i < n; i += 1) this.faults.push(fault);
  }

  /** The bot's comments in an issue as a reader sees them now (edits applied, deleted ones gone). */
  shown(owner: string, repo: string, number: number): GithubComment[] {
    return this.comments.filter(
      (c) =>
        c.owner === owner &&
        c.repo === repo &&
        c.number === number &&
        !c.deleted &&
        c.user.id === this.bot.id,
    );
  }

  /** A comment a user writes; returns the `issue_comment` `created` payload GitHub would deliver. */
  userComment(
    where: { owner: string; repo: string; number: number; pull?: boolean },
    user: GithubUser,
    body: string,
  ): Json {
    const c = this.store(where.owner, where.repo, where.number, body, user);
    return {
      action: 'created',
      issue: {
        number: where.number,
        title: 'Something is broken',
        user,
        ...(where.pull
          ? { pull_request: { url: `${this.url}/repos/${where.owner}/${where.repo}/pulls/1` } }
          : {}),
      },
      comment: this.view(c),
      repository: this.repository(where.owner, where.repo),
      sender: user,
    };
  }

  /** Where each repository is cloned from (`owner/name` → URL), as GitHub's payloads name it. */
  readonly cloneUrls = new Map<string, string>();

  private repository(owner: string, repo: string): Json {
    const clone = this.cloneUrls.get(`${owner}/${repo}`);
    return {
      name: repo,
      full_name: `${owner}/${repo}`,
      owner: { login: owner },
      ...(clone ? { clone_url: clone } : {}),
    };
  }

  /**
   * An issue or pull request closed by `user`: the `issues` (or `pull_request`) `closed` payload GitHub
   * would deliver, and the event's name.
   */
  closed(
    where: { owner: string; repo: string; number: number; pull?: boolean; merged?: boolean },
    user: GithubUser,
  ): { event: string; payload: Json } {
    const closedAt = new Date().toISOString();
    const item = { number: where.number, title: 'Something is broken', state: 'closed', closed_at: closedAt };
    return where.pull
      ? {
          event: 'pull_request',
          payload: {
            action: 'closed',
            pull_request: { ...item, merged: where.merged ?? false },
            repository: this.repository(where.owner, where.repo),
            sender: user,
          },
        }
      : {
          event: 'issues',
          payload: {
            action: 'closed',
            issue: item,
            repository: this.repository(where.owner, where.repo),
            sender: user,
          },
        };
  }

  /**
   * Sends a signed delivery to `target` (gated's `/hooks/github` URL, or a handler taking the Request);
   * returns the HTTP status it answered. `secret` is what GitHub signs with (a wrong one: a forged delivery).
   */
  async deliver(target: HookTarget, event: string, payload: Json, secret: string, id: string = randomUUID()) {
    const d: Delivery = { id, event, body: JSON.stringify(payload) };
    this.deliveries.push(d);
    return this.send(target, d, secret);
  }

  /** Sends a delivery again under its own id (the "Redeliver" button). */
  async redeliver(target: HookTarget, id: string, secret: string): Promise<number> {
    const d = this.deliveries.find((x) => x.id === id);
    if (!d) throw new Error(`no delivery ${id}`);
    return this.send(target, d, secret);
  }

  private async send(target: HookTarget, d: Delivery, secret: string): Promise<number> {
    const req = new Request(typeof target === 'string' ? target : 'http://gated.test/hooks/github', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'GitHub-Hookshot/test',
        'x-github-event': d.event,
        'x-github-delivery': d.id,
        'x-hub-signature-256': githubSignature(secret, d.body),
      },
      body: d.body,
    });
    const res = typeof target === 'string' ? await fetch(req) : await target(req);
    await res.arrayBuffer();
    return res.status;
  }

  /** Stops listening and cuts open connections (a hung answer included). */
  close(): Promise<void> {
    return this.loop.close();
  }

  private store(owner: string, repo: string, number: number, body: string, user: GithubUser): GithubComment {
    // Real time (`since` is compared with it), kept increasing so that order is never a tie.
    this.clock = Math.max(this.clock + 1, Date.now());
    const at = new Date(this.clock).toISOString();
    const c: GithubComment = {
      id: (this.nextId += 1),
      owner,
      repo,
      number,
      body,
      user,
      created_at: at,
      updated_at: at,
      deleted: false,
      edits: [],
      reactions: [],
    };
    this.comments.push(c);
    return c;
  }

  private view(c: GithubComment): Json {
    return {
      id: c.id,
      body: c.body,
      user: c.user,
      author_association: this.associations.get(c.user.id) ?? 'NONE',
      created_at: c.created_at,
      updated_at: c.updated_at,
      html_url: `https://github.test/${c.owner}/${c.repo}/issues/${c.number}#issuecomment-${c.id}`,
    };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const body = (raw ? JSON.parse(raw) : {}) as Json;
    const auth = req.headers.authorization ?? '';
    const method = req.method ?? 'GET';
    const path = url.pathname;
    const appAnswer = this.app?.handle(method, path, auth);
    if (appAnswer) return send(res, appAnswer.status, appAnswer.body);
    // An installation token writes as the App's bot user; the personal token as `bot`.
    const author = this.app?.accepts(auth) ? this.app.bot : this.bot;
    if (author === this.bot && auth !== `token ${this.token}` && auth !== `Bearer ${this.token}`) {
      return send(res, 401, { message: 'Bad credentials' });
    }
    if (method === 'GET' && path === '/user') {
      if (author !== this.bot) return send(res, 403, { message: 'Resource not accessible by integration' });
      return send(res, 200, this.bot);
    }
    const user = /^\/users\/([^/]+)$/.exec(path);
    if (method === 'GET' && user) {
      const login = decodeURIComponent(user[1]!);
      const found = [this.bot, this.app?.bot].find((u) => u?.login === login);
      return found ? send(res, 200, found) : send(res, 404, { message: 'Not Found' });
    }
    const list = /^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/.exec(path);
    const one = /^\/repos\/([^/]+)\/([^/]+)\/issues\/comments\/(\d+)(\/reactions)?$/.exec(path);
    if (method !== 'GET') this.writes.push({ method, path });
    if (method !== 'GET' && (list || (one && !one[4])) && this.faults.length > 0) {
      const fault = this.faults.shift()!;
      if (fault.kind === 'hang') {
        // The write happens; the answer never comes (gated is killed while it waits).
        if (list && method === 'POST')
          this.store(list[1]!, list[2]!, Number(list[3]), String(body.body), author);
        return;
      }
      return this.refuse(res, fault);
    }
    if (list && method === 'GET') {
      const since = url.searchParams.get('since');
      const per = Number(url.searchParams.get('per_page') ?? 30);
      const found = this.comments
        .filter(
          (c) => c.owner === list[1] && c.repo === list[2] && c.number === Number(list[3]) && !c.deleted,
        )
        .filter((c) => !since || c.updated_at >= since)
        .slice(0, per);
      return send(
        res,
        200,
        found.map((c) => this.view(c)),
      );
    }
    if (list && method === 'POST') {
      if (typeof body.body !== 'string' || body.body === '')
        return send(res, 422, { message: 'Validation Failed' });
      if (body.body.length > 65536)
        return send(res, 422, { message: 'body is too long (maximum is 65536 characters)' });
      return send(res, 201, this.view(this.store(list[1]!, list[2]!, Number(list[3]), body.body, author)));
    }
    const c = one ? this.comments.find((x) => x.id === Number(one[3]) && !x.deleted) : undefined;
    if (one && !c) return send(res, 404, { message: 'Not Found' });
    if (one && c && one[4] && method === 'POST') {
      c.reactions.push(String(body.content));
      return send(res, 201, { id: c.reactions.length, content: body.content });
    }
    if (c && method === 'PATCH') {
      if (c.user.id !== author.id) return send(res, 403, { message: 'Must have admin rights' });
      c.body = String(body.body);
      c.edits.push(c.body);
      this.clock = Math.max(this.clock + 1, Date.now());
      c.updated_at = new Date(this.clock).toISOString();
      return send(res, 200, this.view(c));
    }
    if (c && method === 'DELETE') {
      c.deleted = true;
      res.writeHead(204).end();
      return;
    }
    send(res, 404, { message: 'Not Found' });
  }

  private refuse(res: ServerResponse, f: Exclude<GithubFault, { kind: 'hang' }>): void {
    switch (f.kind) {
      case 'rate_limited':
        return send(res, 429, { message: 'Too Many Requests' }, { 'retry-after': String(f.retryAfterS) });
      case 'secondary':
        return send(
          res,
          403,
          {
            message:
              'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
          },
          { 'retry-after': String(f.retryAfterS) },
        );
      case 'primary': {
        const at = Math.floor(Date.now() / 1000) + f.resetInS;
        return send(
          res,
          403,
          { message: 'API rate limit exceeded for user ID 9001.' },
          { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(at) },
        );
      }
      case 'forbidden':
        return send(res, 403, { message: 'Resource not accessible by personal access token' });
      case 'server_error':
        return send(res, 502, { message: 'Server Error' });
    }
  }
}

/** GitHub's signature of a delivery body: `sha256=` + hex HMAC-SHA256 with the webhook secret. */
export function githubSignature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res
    .writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
      'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
      'x-ratelimit-used': '1',
      'x-ratelimit-resource': 'core',
      ...headers,
    })
    .end(JSON.stringify(body));
}
