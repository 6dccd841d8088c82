/**
 * A small Slack on 127.0.0.1 for tests, speaking the real protocols the official clients use:
 * - the Web API: `POST /api/<method>` with a form-encoded or JSON body and the token in `Authorization`,
 *   answering `{ok:true,…}` or `{ok:false,error}` with HTTP 200, or HTTP 429 with `Retry-After`: auth.test,
 *   apps.connections.open (app-level token), chat.postMessage / chat.update / chat.delete, reactions.add,
 *   files.getUploadURLExternal → upload URL → files.completeUploadExternal;
 * - Socket Mode: the URL apps.connections.open hands out is a WebSocket that says `hello`, then pushes
 *   envelopes (`events_api`, `interactive`) each with an `envelope_id` the client must ack;
 * - files users shared, served from `/files/…` only with the bot token, as `url_private_download` is.
 * The HTTP Events API side (signed POSTs to gated) is `signSlackRequest` below.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { listenLoopback, type Loopback } from './loopback.js';

/** A refusal the next chat.postMessage / chat.update calls answer with. */
export type SlackFault = { status: 429; retryAfterS: number } | { status: 500 | 502 } | { error: string };

/** One message the bot posted (its current text in `text`, every edit in `edits`). */
export interface SlackPosted {
  ts: string;
  channel: string;
  text: string;
  thread_ts: string | undefined;
  blocks: unknown;
  edits: string[];
  deleted: boolean;
  files: SlackUpload[];
}

/** A file the bot uploaded and shared. */
export interface SlackUpload {
  id: string;
  name: string;
  data: Buffer;
  channel: string;
  thread_ts: string | undefined;
}

/** What a test says about a user message. */
export interface SlackPush {
  channel: string;
  user: string;
  text: string;
  thread_ts?: string;
  /** A bot's message (bot_id set), e.g. the bot itself. */
  botId?: string;
  files?: Array<{ name: string; data: Buffer; mimetype: string }>;
}

type Json = Record<string, unknown>;

/** The Slack server. */
export class SlackApiServer {
  readonly botToken = 'xoxb-test-bot-token';
  readonly appToken = 'xapp-test-app-token';
  readonly botUserId = 'UBOT0001';
  readonly botId = 'BBOT0001';
  readonly channelId = 'C0TEST01';
  /** Every message the bot posted, oldest first. */
  readonly posted: SlackPosted[] = [];
  /** Envelope ids the client acked. */
  readonly acked: string[] = [];
  /** Web API calls by method name, in order (tokens never kept). */
  readonly calls: Array<{ method: string; args: Json }> = [];
  private faults: SlackFault[] = [];
  private sockets = new Set<WebSocket>();
  private lastEnvelope: Json | undefined;
  private files = new Map<string, { data: Buffer; mimetype: string; name: string }>();
  private uploads = new Map<string, { name: string; data?: Buffer }>();
  private clock = 1_760_000_000;
  private seq = 0;

  private constructor(
    readonly server: Server,
    private readonly wss: WebSocketServer,
    private readonly loop: Loopback,
  ) {}

  /** Starts on a free loopback port, or on `port`. */
  static async start(port = 0): Promise<SlackApiServer> {
    const wss = new WebSocketServer({ noServer: true });
    // The handlers need the instance, which needs the listening server.
    const ref: { self?: SlackApiServer } = {};
    const server = createServer((req, res) => void ref.self!.handle(req, res));
    server.on('upgrade', (req, socket, head) => {
      if (!req.url?.startsWith('/link')) return void socket.destroy();
      wss.handleUpgrade(req, socket, head, (ws) => ref.self!.connected(ws));
    });
    ref.self = new SlackApiServer(server, wss, await listenLoopback(server, port));
    return ref.self;
  }

  /** The Web API base URL the clients take as `slackApiUrl`. */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.loop.port}/api/`;
  }

  /** Open Socket Mode connections. */
  get connections(): number {
    return this.sockets.size;
  }

  /** The next `n` posts and updates answer with `fault`. */
  failNext(fault: SlackFault, n = 1): void {
    for (let i = 0; i < n; i += 1) this.faults.push(fault);
  }

  /** The bot's messages in a channel as a user sees them now. */
  shown(channel: string): SlackPosted[] {
    return this.posted.filter((p) => p.channel === channel && !p.deleted);
  }

  /** A new message timestamp, increasing like Slack's. */
  nextTs(): string {
    this.seq += 1;
    return `${this.clock + this.seq}.${String(this.seq).padStart(6, '0')}`;
  }

  /** A user's message as the Events API `message` event. Files get private URLs on this server. */
  messageEvent(p: SlackPush): Json {
    const ts = this.nextTs();
    const files = (p.files ?? []).map((f) => {
      const id = `F${randomUUID().slice(0, 8).toUpperCase()}`;
      this.files.set(id, f);
      return {
        id,
        name: f.name,
        mimetype: f.mimetype,
        size: f.data.length,
        url_private_download: `http://127.0.0.1:${this.loop.port}/files/${id}/${encodeURIComponent(f.name)}`,
      };
    });
    return {
      type: 'message',
      channel: p.channel,
      channel_type: p.channel.startsWith('D') ? 'im' : 'channel',
      user: p.user,
      text: p.text,
      ts,
      event_ts: ts,
      ...(p.thread_ts ? { thread_ts: p.thread_ts } : {}),
      ...(p.botId ? { bot_id: p.botId } : {}),
      ...(files.length ? { files, subtype: 'file_share' } : {}),
    };
  }

  /** The Events API callback wrapping `event`, as both Socket Mode and HTTP deliver it. */
  callback(event: Json): Json {
    return {
      token: 'verification-token-unused',
      team_id: 'T0TEST',
      api_app_id: 'A0TEST',
      type: 'event_callback',
      event_id: `Ev${randomUUID().slice(0, 10).toUpperCase()}`,
      event_time: Math.floor(Date.now() / 1000),
      event,
    };
  }

  /** Pushes an Events API payload over every Socket Mode connection; returns the envelope id. */
  pushEvent(payload: Json, retry = 0): string {
    return this.pushEnvelope({ type: 'events_api', payload, retry_attempt: retry, retry_reason: '' });
  }

  /**
   * The `block_actions` interaction Slack sends when `user` presses button `index` of the bot's message
   * `ts` (throws when that message has no such button, as a client could not press it).
   */
  blockActions(ts: string, index: number, user: string): Json {
    const p = this.posted.find((m) => m.ts === ts && !m.deleted);
    const blocks = (p?.blocks ?? []) as Array<{ type: string; elements?: Json[] }>;
    const button = blocks.find((b) => b.type === 'actions')?.elements?.[index];
    if (!p || !button) throw new Error(`message ${ts} has no button ${index}`);
    return {
      type: 'block_actions',
      trigger_id: `${this.nextTs()}.trigger`,
      user: { id: user, username: user.toLowerCase(), name: user.toLowerCase() },
      channel: { id: p.channel },
      container: { type: 'message', message_ts: p.ts, channel_id: p.channel, thread_ts: p.thread_ts },
      message: { ts: p.ts, thread_ts: p.thread_ts, text: p.text },
      actions: [
        {
          type: 'button',
          action_id: button.action_id,
          block_id: 'actions',
          value: button.value,
          action_ts: this.nextTs(),
        },
      ],
    };
  }

  /** Pushes a block_actions interaction (a button pressed) over Socket Mode. */
  pushInteraction(payload: Json): string {
    return this.pushEnvelope({ type: 'interactive', payload });
  }

  /** Sends the last envelope again, with a new envelope id and a retry count, as Slack does unacked. */
  redeliverLast(): string {
    const last = this.lastEnvelope!;
    return this.pushEnvelope({ ...last, retry_attempt: Number(last.retry_attempt ?? 0) + 1 });
  }

  private pushEnvelope(body: Json): string {
    const envelope_id = randomUUID();
    const envelope = { envelope_id, accepts_response_payload: false, ...body };
    this.lastEnvelope = body;
    const text = JSON.stringify(envelope);
    for (const ws of this.sockets) ws.send(text);
    return envelope_id;
  }

  /** Resolves once `envelopeId` was acked. */
  async waitAck(envelopeId: string, timeoutMs = 5000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!this.acked.includes(envelopeId)) {
      if (Date.now() > end) throw new Error(`envelope ${envelopeId} was never acked`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Resolves once a Socket Mode client is connected. */
  async waitConnected(timeoutMs = 5000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (this.sockets.size === 0) {
      if (Date.now() > end) throw new Error('no socket mode connection');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Closes every connection and stops listening. */
  async close(): Promise<void> {
    for (const ws of this.sockets) ws.terminate();
    this.wss.close();
    await this.loop.close();
  }

  private connected(ws: WebSocket): void {
    this.sockets.add(ws);
    ws.on('close', () => this.sockets.delete(ws));
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { envelope_id?: string };
      if (msg.envelope_id) this.acked.push(msg.envelope_id);
    });
    ws.send(JSON.stringify({ type: 'hello', num_connections: 1, connection_info: { app_id: 'A0TEST' } }));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const raw = await readAll(req);
    if (url.pathname.startsWith('/files/')) return this.serveFile(req, res, url.pathname);
    if (url.pathname.startsWith('/upload/')) return this.takeUpload(req, res, url.pathname, raw);
    const method = url.pathname.replace(/^\/api\//, '');
    const args = await parseBody(req.headers['content-type'], raw);
    const auth = req.headers.authorization ?? (args.token ? `Bearer ${String(args.token)}` : '');
    delete args.token;
    this.calls.push({ method, args });
    const wanted = method === 'apps.connections.open' ? this.appToken : this.botToken;
    if (auth !== `Bearer ${wanted}`) return send(res, 200, { ok: false, error: 'invalid_auth' });
    if (['chat.postMessage', 'chat.update'].includes(method) && this.faults.length > 0) {
      const f = this.faults.shift()!;
      if ('error' in f) return send(res, 200, { ok: false, error: f.error });
      if (f.status === 429) return send(res, 429, { ok: false, error: 'ratelimited' }, f.retryAfterS);
      return send(res, f.status, { ok: false, error: 'internal_error' });
    }
    send(res, 200, this.answer(method, args));
  }

  private answer(method: string, a: Json): Json {
    const str = (k: string) => (typeof a[k] === 'string' ? (a[k] as string) : undefined);
    switch (method) {
      case 'auth.test':
        return { ok: true, user_id: this.botUserId, bot_id: this.botId, user: 'gated', team_id: 'T0TEST' };
      case 'apps.connections.open':
        return { ok: true, url: `ws://127.0.0.1:${this.loop.port}/link?ticket=${randomUUID()}` };
      case 'chat.postMessage': {
        if (!str('channel')) return { ok: false, error: 'channel_not_found' };
        if (!str('text') && !a.blocks) return { ok: false, error: 'no_text' };
        const p: SlackPosted = {
          ts: this.nextTs(),
          channel: str('channel')!,
          text: str('text') ?? '',
          thread_ts: str('thread_ts'),
          blocks: typeof a.blocks === 'string' ? JSON.parse(a.blocks) : a.blocks,
          edits: [],
          deleted: false,
          files: [],
        };
        this.posted.push(p);
        return { ok: true, channel: p.channel, ts: p.ts, message: { text: p.text, ts: p.ts } };
      }
      case 'chat.update': {
        const p = this.find(str('channel'), str('ts'));
        if (!p) return { ok: false, error: 'message_not_found' };
        p.text = str('text') ?? p.text;
        if (a.blocks !== undefined) p.blocks = typeof a.blocks === 'string' ? JSON.parse(a.blocks) : a.blocks;
        p.edits.push(p.text);
        return { ok: true, channel: p.channel, ts: p.ts, text: p.text };
      }
      case 'chat.delete': {
        const p = this.find(str('channel'), str('ts'));
        if (!p) return { ok: false, error: 'message_not_found' };
        p.deleted = true;
        return { ok: true, channel: p.channel, ts: p.ts };
      }
      case 'reactions.add':
        return this.find(str('channel'), str('timestamp')) || str('timestamp')
          ? { ok: true }
          : { ok: false, error: 'message_not_found' };
      case 'files.getUploadURLExternal': {
        const id = `F${randomUUID().slice(0, 8).toUpperCase()}`;
        this.uploads.set(id, { name: str('filename') ?? 'file' });
        return { ok: true, file_id: id, upload_url: `http://127.0.0.1:${this.loop.port}/upload/${id}` };
      }
      case 'files.completeUploadExternal':
        return this.complete(a);
      default:
        return { ok: false, error: 'unknown_method' };
    }
  }

  private complete(a: Json): Json {
    const list = (typeof a.files === 'string' ? JSON.parse(a.files) : a.files) as Array<{ id: string }>;
    const channel = typeof a.channel_id === 'string' ? a.channel_id : '';
    const thread = typeof a.thread_ts === 'string' ? a.thread_ts : undefined;
    const done: Json[] = [];
    for (const f of list) {
      const up = this.uploads.get(f.id);
      if (!up?.data) return { ok: false, error: 'file_not_found' };
      // The file is shared as a new message of the bot in the channel (or thread).
      const file: SlackUpload = { id: f.id, name: up.name, data: up.data, channel, thread_ts: thread };
      this.posted.push({
        ts: this.nextTs(),
        channel,
        text: typeof a.initial_comment === 'string' ? a.initial_comment : '',
        thread_ts: thread,
        blocks: undefined,
        edits: [],
        deleted: false,
        files: [file],
      });
      done.push({ id: f.id, name: up.name });
    }
    return { ok: true, files: done };
  }

  private find(channel: string | undefined, ts: string | undefined): SlackPosted | undefined {
    return this.posted.find((p) => p.channel === channel && p.ts === ts && !p.deleted);
  }

  private serveFile(req: IncomingMessage, res: ServerResponse, path: string): void {
    const id = path.split('/')[2] ?? '';
    const f = this.files.get(id);
    // Private files need the bot token, as files.slack.com does.
    if (req.headers.authorization !== `Bearer ${this.botToken}`) return void res.writeHead(403).end();
    if (!f) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': f.mimetype, 'content-length': f.data.length }).end(f.data);
  }

  private async takeUpload(req: IncomingMessage, res: ServerResponse, path: string, raw: Buffer) {
    const id = path.split('/')[2] ?? '';
    const up = this.uploads.get(id);
    if (!up) return void res.writeHead(404).end();
    const type = req.headers['content-type'] ?? '';
    if (type.startsWith('multipart/form-data')) {
      const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
      const file = [...form.values()].find((v) => typeof v !== 'string');
      up.data = file && typeof file !== 'string' ? Buffer.from(await file.arrayBuffer()) : Buffer.alloc(0);
    } else up.data = raw;
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${up.data.length}`);
  }
}

/** The headers Slack signs an HTTP Events API request with (v0 HMAC-SHA256 of `v0:<ts>:<body>`). */
export function signSlackRequest(secret: string, body: string, at = Date.now()): Record<string, string> {
  const ts = String(Math.floor(at / 1000));
  const sig = createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex');
  return { 'x-slack-request-timestamp': ts, 'x-slack-signature': `v0=${sig}` };
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function parseBody(type: string | undefined, raw: Buffer): Promise<Json> {
  if (raw.length === 0) return {};
  if (type?.startsWith('application/json')) return JSON.parse(raw.toString('utf8')) as Json;
  return Object.fromEntries(new URLSearchParams(raw.toString('utf8')));
}

function send(res: ServerResponse, status: number, body: Json, retryAfterS?: number): void {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (retryAfterS !== undefined) headers['retry-after'] = String(retryAfterS);
  res.writeHead(status, headers).end(JSON.stringify(body));
}
