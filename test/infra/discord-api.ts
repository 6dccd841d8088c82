/**
 * A small Discord API on 127.0.0.1 that discord.js connects to, for tests: REST under `/api/v10` (gateway/bot,
 * users/@me, channels/:id, channels/:id/messages as JSON or multipart with `payload_json` + `files[n]`,
 * channels/:id/messages/:id PATCH and DELETE, channels/:id/typing) and a websocket gateway on the same
 * port speaking HELLO, IDENTIFY → READY + GUILD_CREATE, heartbeat → ACK, and MESSAGE_CREATE pushed by the
 * test. A pushed message may carry attachments, served without a token from `/attachments/…` on the same
 * port, as Discord's CDN serves them. The next message sends can be made to answer 429 (Retry-After), 5xx
 * or 403 the way Discord does, and the next downloads 502. Message creates enforce `nonce` as Discord does with `enforce_nonce: true`:
 * the same nonce in the same channel within a few minutes returns the message the first create made, and
 * creates nothing. Messages may carry button components; `press` sends the INTERACTION_CREATE a user's press
 * makes and records the bot's callback (test/infra/discord-interactions.ts).
 */
import { listenLoopback, type Loopback } from './loopback.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  buttonsOf,
  interactionCallback,
  pressPayload,
  type Press,
  type StoredButton,
} from './discord-interactions.js';

export type { Press, StoredButton } from './discord-interactions.js';

/** A user as the gateway and REST return it. */
export interface DiscordUser {
  id: string;
  username: string;
  global_name: string | null;
  bot?: boolean;
}

/** A failure the next message sends answer with. */
export type DiscordFault =
  { status: 429; retryAfterS: number } | { status: 500 | 502 | 503 } | { status: 403 | 400 | 404 };

/** A file uploaded with a message (multipart `files[n]`), as the server stored it. */
export interface UploadedFile {
  name: string;
  contentType: string;
  data: Buffer;
}

/** One message the bot posted, as the server stored it when it was created (edits: `edits`, `shown`). */
export interface PostedMessage {
  id: string;
  channel_id: string;
  content: string;
  message_reference: { message_id: string } | undefined;
  allowed_mentions: unknown;
  nonce: string | undefined;
  attachments: UploadedFile[];
  /** The buttons the message was created with. */
  buttons: StoredButton[];
}

/** One edit of a bot message (PATCH). */
export interface MessageEdit {
  channelId: string;
  messageId: string;
  content: string;
  allowed_mentions: unknown;
  /** The buttons the edit left, when it set `components` (undefined: not touched). */
  buttons: StoredButton[] | undefined;
}

/** A bot message as a user sees it now: its current text and files. */
export interface ShownMessage {
  id: string;
  content: string;
  attachments: UploadedFile[];
}

/** How long Discord remembers an enforced nonce ("the past few minutes"). */
const NONCE_WINDOW_MS = 5 * 60_000;

/** What a test says about a user message pushed to the bot. */
export interface PushMessage {
  channelId: string;
  author: DiscordUser;
  content: string;
  /** Users mentioned with `<@id>` in content (the gateway lists them). */
  mentions?: DiscordUser[];
  /** Reply to this message (a stored id of the channel). */
  replyTo?: string;
  /** Nickname in the guild (guild channels only). */
  nick?: string;
  /** Files attached by the user; each gets a CDN URL on this server. `size` overrides the listed size. */
  attachments?: Array<{ name: string; data: Buffer; contentType?: string; size?: number }>;
}

type Json = Record<string, unknown>;

const GUILD_ID = '900000000000000001';
const DISCORD_EPOCH = 1_420_070_400_000n;
let increment = 0n;
/** A snowflake as Discord makes them: milliseconds since 2015 in the high bits (discord.js reads dates from it). */
const nextId = () => String(((BigInt(Date.now()) - DISCORD_EPOCH) << 22n) | (increment++ & 4095n));

/** The running server. */
export class DiscordApiServer {
  readonly guildId = GUILD_ID;
  /** A guild text channel and a thread under it, in the guild the bot is in. */
  readonly textChannelId = '900000000000000010';
  readonly threadId = '900000000000000011';
  /** A DM channel (not in any guild). */
  readonly dmChannelId = '900000000000000020';
  readonly posted: PostedMessage[] = [];
  /** Reactions the bot put on messages (PUT …/reactions/{emoji}/@me), in order. */
  readonly reactions: Array<{ channelId: string; messageId: string; emoji: string }> = [];
  /** Edits of bot messages (PATCH), in order. */
  readonly edits: MessageEdit[] = [];
  /** Ids of bot messages deleted (DELETE), in order. */
  readonly deleted: string[] = [];
  /** Button presses sent to the bot, in order, with the bot's answers. */
  readonly presses: Press[] = [];
  private readonly pressPayloads = new Map<string, Json>();
  /** Every REST request, as `METHOD /path`. */
  readonly requests: string[] = [];
  /** Attachment downloads from the CDN path (every request, failed ones included). */
  cdnDownloads = 0;
  private cdnFaults = 0;
  private readonly cdn = new Map<string, { data: Buffer; contentType: string }>();
  /** Uploads whose answer is withheld: the message is made, the client never hears back. */
  private swallow = 0;
  private readonly messages = new Map<string, Json>();
  private readonly faults: DiscordFault[] = [];
  private readonly nonces = new Map<string, { at: number; msg: Json }>();
  /** Creates answered with an earlier message because their enforced nonce was seen before. */
  nonceHits = 0;
  private gatewayFaults = 0;
  /** Close every IDENTIFY with this code (4014: the application lacks a privileged intent). */
  closeIdentifyWith: number | undefined;
  private readonly wss: WebSocketServer;
  private conn: { ws: WebSocket; seq: number } | undefined;
  private identifyWaiters: Array<() => void> = [];
  private postWaiters: Array<() => void> = [];
  private changeWaiters: Array<() => void> = [];

  private loopback!: Loopback;

  private constructor(
    server: Server,
    readonly token: string,
    readonly bot: DiscordUser,
  ) {
    this.wss = new WebSocketServer({ server });
    this.wss.on('connection', (ws) => this.onConnection(ws));
  }

  /** Starts a server for `token` on a free loopback port. */
  static async start(token = 'discord-test-token'): Promise<DiscordApiServer> {
    const bot: DiscordUser = { id: '800000000000000001', username: 'gated', global_name: 'Gated', bot: true };
    const server = createServer();
    const api = new DiscordApiServer(server, token, bot);
    server.on('request', (req, res) => void api.handle(req, res));
    api.loopback = await listenLoopback(server);
    return api;
  }

  private get port(): number {
    return this.loopback.port;
  }

  /** The REST base for discord.js (`DISCORD_API_ROOT`). */
  get apiRoot(): string {
    return `http://127.0.0.1:${this.port}/api`;
  }

  /** Pushes a MESSAGE_CREATE to the connected bot; returns the message payload. */
  push(m: PushMessage): Json {
    const inGuild = m.channelId !== this.dmChannelId;
    const id = nextId();
    const attachments = (m.attachments ?? []).map((a) => {
      const attId = nextId();
      const path = `/attachments/${m.channelId}/${attId}/${encodeURIComponent(a.name)}`;
      const contentType = a.contentType ?? 'application/octet-stream';
      this.cdn.set(path, { data: a.data, contentType });
      const url = `http://127.0.0.1:${this.port}${path}`;
      return {
        id: attId,
        filename: a.name,
        size: a.size ?? a.data.length,
        url,
        proxy_url: url,
        ...(a.contentType ? { content_type: a.contentType } : {}),
      };
    });
    const msg: Json = {
      id,
      channel_id: m.channelId,
      author: m.author,
      content: m.content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: m.mentions ?? [],
      mention_roles: [],
      attachments,
      embeds: [],
      pinned: false,
      type: m.replyTo ? 19 : 0,
      channel_type: m.channelId === this.dmChannelId ? 1 : m.channelId === this.threadId ? 11 : 0,
    };
    if (inGuild) {
      msg.guild_id = GUILD_ID;
      msg.member = {
        nick: m.nick ?? null,
        roles: [],
        joined_at: new Date(0).toISOString(),
        deaf: false,
        mute: false,
      };
    }
    if (m.replyTo) {
      msg.message_reference = {
        message_id: m.replyTo,
        channel_id: m.channelId,
        guild_id: inGuild ? GUILD_ID : undefined,
      };
      msg.referenced_message = this.messages.get(m.replyTo) ?? null;
    }
    this.messages.set(msg.id as string, msg);
    this.dispatch('MESSAGE_CREATE', msg);
    return msg;
  }

  /** Pushes the same MESSAGE_CREATE again (a gateway resume replays events). */
  replay(msg: Json): void {
    this.dispatch('MESSAGE_CREATE', msg);
  }

  /** The buttons a message shows now ([] once an edit removed them). */
  buttonsOn(messageId: string): StoredButton[] {
    return buttonsOf(this.messages.get(messageId)?.components);
  }

  /** `user` presses the button labelled `label` on the bot's message: an INTERACTION_CREATE to the bot. */
  press(channelId: string, messageId: string, user: DiscordUser, label: string): Press {
    const message = this.messages.get(messageId);
    if (message?.channel_id !== channelId) throw new Error(`no message ${messageId} in ${channelId}`);
    const button = this.buttonsOn(messageId).find((b) => b.label === label);
    if (!button) throw new Error(`message ${messageId} has no button '${label}'`);
    const inGuild = channelId !== this.dmChannelId;
    const channel: Json = inGuild
      ? { id: channelId, type: channelId === this.threadId ? 11 : 0, guild_id: GUILD_ID, name: 'general' }
      : { id: channelId, type: 1 };
    const id = nextId();
    const { payload, token } = pressPayload({
      id,
      appId: this.bot.id,
      guildId: inGuild ? GUILD_ID : undefined,
      channel,
      message,
      customId: button.custom_id,
      user,
    });
    const press: Press = {
      id,
      token,
      messageId,
      customId: button.custom_id,
      user,
      answeredWith: undefined,
      callbacks: 0,
    };
    this.presses.push(press);
    this.pressPayloads.set(id, payload);
    this.dispatch('INTERACTION_CREATE', payload);
    return press;
  }

  /** Sends a press's INTERACTION_CREATE again (a gateway resume replays events). */
  replayPress(press: Press): void {
    this.dispatch('INTERACTION_CREATE', this.pressPayloads.get(press.id)!);
  }

  /** The next `n` message sends fail with `fault`. */
  failNext(fault: DiscordFault, n = 1): void {
    for (let i = 0; i < n; i += 1) this.faults.push(fault);
  }

  /** The next `n` attachment downloads from the CDN path answer 502. */
  failDownloads(n: number): void {
    this.cdnFaults += n;
  }

  /** The next `n` GET /gateway/bot answer 502 (the API is down when the bot connects). */
  failGateway(n: number): void {
    this.gatewayFaults += n;
  }

  /** Resolves once the bot posted at least `n` messages. */
  async waitForPosted(n: number): Promise<PostedMessage[]> {
    while (this.posted.length < n) await new Promise<void>((resolve) => this.postWaiters.push(resolve));
    return this.posted;
  }

  /**
   * The next `n` creates that upload files are made but never answered: the answer is lost, as when the
   * sender crashes after the platform accepted the message and before it recorded that.
   */
  swallowNextUploads(n = 1): void {
    this.swallow += n;
  }

  /** The bot's messages in a channel as a user sees them now: current text, deleted ones gone. */
  shown(channelId: string): ShownMessage[] {
    return this.posted
      .filter((p) => p.channel_id === channelId && this.messages.has(p.id))
      .map((p) => ({
        id: p.id,
        content: this.messages.get(p.id)!.content as string,
        attachments: p.attachments,
      }));
  }

  /** Resolves once `pred` holds, checked after every create, edit and delete. */
  async waitFor(pred: () => boolean): Promise<void> {
    while (!pred()) await new Promise<void>((resolve) => this.changeWaiters.push(resolve));
  }

  /** Resolves when a client has identified (the bot is connected). */
  waitForIdentify(): Promise<void> {
    if (this.conn) return Promise.resolve();
    return new Promise((resolve) => this.identifyWaiters.push(resolve));
  }

  async close(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    await this.loopback.close();
  }

  private dispatch(t: string, d: unknown): void {
    if (!this.conn) throw new Error(`no bot connected to receive ${t}`);
    this.conn.seq += 1;
    this.conn.ws.send(JSON.stringify({ op: 0, t, s: this.conn.seq, d }));
  }

  private onConnection(ws: WebSocket): void {
    ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: 41_250 } }));
    ws.on('message', (raw) => {
      const p = JSON.parse(String(raw)) as { op: number; d: Json };
      if (p.op === 1) ws.send(JSON.stringify({ op: 11 }));
      else if (p.op === 2) this.identify(ws, p.d);
    });
    ws.on('close', () => {
      if (this.conn?.ws === ws) this.conn = undefined;
    });
  }

  private identify(ws: WebSocket, d: Json): void {
    if (d.token !== this.token) return ws.close(4004, 'Authentication failed.');
    if (this.closeIdentifyWith) return ws.close(this.closeIdentifyWith, 'Disallowed intent(s).');
    this.conn = { ws, seq: 0 };
    const url = `ws://127.0.0.1:${this.port}`;
    this.dispatch('READY', {
      v: 10,
      user: this.bot,
      guilds: [{ id: GUILD_ID, unavailable: true }],
      session_id: 'session-1',
      resume_gateway_url: url,
      shard: [0, 1],
      application: { id: this.bot.id, flags: 0 },
    });
    const channel = (id: string, type: number, extra: Json = {}) => ({
      id,
      type,
      guild_id: GUILD_ID,
      position: 0,
      permission_overwrites: [],
      ...extra,
    });
    this.dispatch('GUILD_CREATE', {
      id: GUILD_ID,
      name: 'Test guild',
      icon: null,
      owner_id: '700000000000000001',
      roles: [
        {
          id: GUILD_ID,
          name: '@everyone',
          permissions: '0',
          position: 0,
          color: 0,
          hoist: false,
          managed: false,
          mentionable: false,
        },
      ],
      emojis: [],
      stickers: [],
      features: [],
      member_count: 2,
      members: [],
      presences: [],
      voice_states: [],
      joined_at: new Date(0).toISOString(),
      large: false,
      unavailable: false,
      channels: [channel(this.textChannelId, 0, { name: 'general' })],
      threads: [
        channel(this.threadId, 11, {
          name: 'a thread',
          parent_id: this.textChannelId,
          owner_id: '700000000000000001',
          thread_metadata: {
            archived: false,
            auto_archive_duration: 60,
            archive_timestamp: new Date(0).toISOString(),
            locked: false,
          },
        }),
      ],
    });
    for (const w of this.identifyWaiters.splice(0)) w();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? '').split('?')[0]!;
    const method = req.method ?? 'GET';
    this.requests.push(`${method} ${path}`);
    const file = method === 'GET' ? this.cdn.get(path) : undefined;
    if (file) {
      this.cdnDownloads += 1;
      if (this.cdnFaults > 0) {
        this.cdnFaults -= 1;
        return send(res, 502, { message: 'Bad Gateway', code: 0 });
      }
      res.writeHead(200, { 'content-type': file.contentType, 'content-length': file.data.length });
      return void res.end(file.data);
    }
    if (method === 'POST' && path.startsWith('/api/v10/interactions/')) {
      // Interaction callbacks carry no bot token: the interaction's own token is in the path.
      const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json) : {};
      const answer = interactionCallback(this.presses, path, body);
      if (answer) {
        this.changed();
        if (answer.status === 204) return void res.writeHead(204).end();
        return send(res, answer.status, answer.body);
      }
    }
    if (req.headers.authorization !== `Bot ${this.token}`)
      return send(res, 401, { message: '401: Unauthorized', code: 0 });
    if (method === 'GET' && path === '/api/v10/gateway/bot') {
      if (this.gatewayFaults > 0) {
        this.gatewayFaults -= 1;
        return send(res, 502, { message: 'Bad Gateway', code: 0 });
      }
      const limit = { total: 1000, remaining: 999, reset_after: 14_400_000, max_concurrency: 1 };
      return send(res, 200, { url: `ws://127.0.0.1:${this.port}`, shards: 1, session_start_limit: limit });
    }
    if (method === 'GET' && path === '/api/v10/users/@me') return send(res, 200, this.bot);
    const r = /^\/api\/v10\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/.exec(path);
    if (r && method === 'PUT') {
      const [, channelId, messageId, emoji] = r as unknown as [string, string, string, string];
      if (this.messages.get(messageId)?.channel_id !== channelId)
        return send(res, 404, { message: 'Unknown Message', code: 10008 });
      this.reactions.push({ channelId, messageId, emoji: decodeURIComponent(emoji) });
      return void res.writeHead(204).end();
    }
    const one = /^\/api\/v10\/channels\/(\d+)\/messages\/(\d+)$/.exec(path);
    if (one && (method === 'PATCH' || method === 'DELETE')) {
      const [, channelId, messageId] = one as unknown as [string, string, string];
      const body = method === 'PATCH' ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json) : {};
      return this.changeMessage(method, channelId, messageId, body, res);
    }
    const m = /^\/api\/v10\/channels\/(\d+)(\/messages|\/typing)?$/.exec(path);
    if (!m) return send(res, 404, { message: '404: Not Found', code: 0 });
    const [, channelId, sub] = m as unknown as [string, string, string | undefined];
    if (method === 'POST' && sub === '/typing') return void res.writeHead(204).end();
    if (method === 'POST' && sub === '/messages') {
      const fault = this.faults.shift();
      if (fault) return this.fail(res, fault);
      const { body, files } = await parseBody(Buffer.concat(chunks), req.headers['content-type']);
      return this.createMessage(channelId, body, files, res);
    }
    send(res, 404, { message: 'Unknown Channel', code: 10003 });
  }

  private fail(res: ServerResponse, f: DiscordFault): void {
    if (f.status === 429) {
      const body = { message: 'You are being rate limited.', retry_after: f.retryAfterS, global: false };
      return send(res, 429, body, { 'retry-after': String(f.retryAfterS), 'x-ratelimit-scope': 'user' });
    }
    if (f.status >= 500) return send(res, f.status, { message: 'Bad Gateway', code: 0 });
    send(res, f.status, { message: 'Missing Access', code: 50001 });
  }

  private changeMessage(
    method: 'PATCH' | 'DELETE',
    channelId: string,
    messageId: string,
    body: Json,
    res: ServerResponse,
  ): void {
    const msg = this.messages.get(messageId);
    if (msg?.channel_id !== channelId) return send(res, 404, { message: 'Unknown Message', code: 10008 });
    if ((msg.author as DiscordUser).id !== this.bot.id)
      return send(res, 403, { message: 'Cannot edit a message authored by another user', code: 50005 });
    if (method === 'DELETE') {
      this.messages.delete(messageId);
      this.deleted.push(messageId);
      this.changed();
      return void res.writeHead(204).end();
    }
    const content = typeof body.content === 'string' ? body.content : '';
    if (content.trim() === '' || content.length > 2000)
      return send(res, 400, { message: 'Invalid Form Body', code: 50035 });
    let buttons: StoredButton[] | undefined;
    try {
      buttons = 'components' in body ? buttonsOf(body.components) : undefined;
    } catch {
      return send(res, 400, { message: 'Invalid Form Body', code: 50035 });
    }
    msg.content = content;
    if ('components' in body) msg.components = body.components;
    msg.edited_timestamp = new Date().toISOString();
    this.edits.push({ channelId, messageId, content, allowed_mentions: body.allowed_mentions, buttons });
    this.changed();
    send(res, 200, msg);
  }

  private changed(): void {
    for (const w of this.changeWaiters.splice(0)) w();
  }

  private createMessage(channelId: string, body: Json, files: UploadedFile[], res: ServerResponse): void {
    const content = typeof body.content === 'string' ? body.content : '';
    if ((content.trim() === '' && files.length === 0) || content.length > 2000) {
      return send(res, 400, { message: 'Invalid Form Body', code: 50035 });
    }
    const nonce = body.nonce === undefined ? undefined : String(body.nonce as string | number);
    if (nonce !== undefined && nonce.length > 25) {
      return send(res, 400, { message: 'Invalid Form Body', code: 50035 });
    }
    const nonceKey = `${channelId}:${nonce}`;
    const prior = nonce !== undefined && body.enforce_nonce === true ? this.nonces.get(nonceKey) : undefined;
    if (prior && Date.now() - prior.at < NONCE_WINDOW_MS) {
      this.nonceHits += 1;
      return send(res, 200, prior.msg);
    }
    let buttons: StoredButton[];
    try {
      buttons = buttonsOf(body.components);
    } catch {
      return send(res, 400, { message: 'Invalid Form Body', code: 50035 });
    }
    const ref = body.message_reference as { message_id: string } | undefined;
    const msg = {
      id: nextId(),
      channel_id: channelId,
      author: this.bot,
      content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: [],
      mention_roles: [],
      embeds: [],
      pinned: false,
      type: ref ? 19 : 0,
      attachments: files.map((f, i) => ({
        id: String(i),
        filename: f.name,
        size: f.data.length,
        content_type: f.contentType,
      })),
      ...(nonce !== undefined ? { nonce } : {}),
      ...(buttons.length > 0 ? { components: body.components } : {}),
    };
    this.messages.set(msg.id, msg);
    if (nonce !== undefined) this.nonces.set(nonceKey, { at: Date.now(), msg });
    this.posted.push({
      id: msg.id,
      channel_id: channelId,
      content,
      message_reference: ref,
      allowed_mentions: body.allowed_mentions,
      nonce,
      attachments: files,
      buttons,
    });
    for (const w of this.postWaiters.splice(0)) w();
    this.changed();
    if (files.length > 0 && this.swallow > 0) {
      // The message exists; its answer is lost (the client's socket stays open until it gives up or dies).
      this.swallow -= 1;
      return;
    }
    send(res, 200, msg);
  }
}

/** A JSON body, or a multipart one as discord.js sends uploads: `payload_json` plus `files[n]`. */
async function parseBody(
  raw: Buffer,
  type: string | undefined,
): Promise<{ body: Json; files: UploadedFile[] }> {
  if (!type?.startsWith('multipart/form-data'))
    return { body: JSON.parse(raw.toString('utf8')) as Json, files: [] };
  const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
  const payload = form.get('payload_json');
  const files: UploadedFile[] = [];
  for (const [key, value] of form.entries()) {
    if (typeof value === 'string' || !/^files\[\d+\]$/.test(key)) continue;
    files.push({ name: value.name, contentType: value.type, data: Buffer.from(await value.arrayBuffer()) });
  }
  return { body: typeof payload === 'string' ? (JSON.parse(payload) as Json) : {}, files };
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    ...headers,
  });
  res.end(data);
}
