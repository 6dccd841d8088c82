import { request } from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach } from 'vitest';
import type { Logger } from '../../core/log.js';
import type { Channel, InboundSink, WebhookHandler } from '../../channels/channel.js';
import { WebChannel } from '../../channels/web/index.js';
import { createHttpApp, emptyStatus, startHttpServer, type StatusSnapshot } from '../../http/app.js';
import { createMetrics, type Metrics } from '../../core/metrics.js';
import type { Db } from '../../store/db.js';
import { History } from '../../store/history.js';
import type { AdminActions } from '../../http/admin.js';
import { ClientBounds, DEFAULT_CLIENT_CAPS, type ClientCaps } from '../../http/bounds.js';
import { insertInbound } from '../../store/messages.js';
import { freshDb, tempDir } from '../helpers/db.js';

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

/** Options for a test server. */
export interface WebServerOptions {
  adminToken?: string;
  status?: StatusSnapshot;
  pingRuntime?: () => Promise<void>;
  now?: () => number;
  /** Keep the log lines (debug level) in `logText()`. */
  captureLog?: boolean;
  groups?: string[];
  /** Serve /api/dashboard/history from a History over the test database. */
  history?: boolean;
  /** The admin actions the wiring would provide. */
  admin?: AdminActions;
  /** GATED_GROUPS_DIR for the chat's file endpoint (default: a fresh temporary folder). */
  groupsDir?: string;
  /** GATED_MAX_ATTACHMENT_BYTES (default 20 MiB). */
  maxAttachmentBytes?: number;
  /** The platform webhooks served at /hooks/<platform>. */
  hooks?: (platform: string) => WebhookHandler | undefined;
  /** The started channels the dashboard's channels panel lists. */
  channels?: () => readonly Channel[];
  /** The bounds on SSE streams and uploads (default: gated's defaults). */
  clientCaps?: ClientCaps;
}

/** A real hono app on 127.0.0.1:0 over a fresh SQLite file, closed after the test. */
export interface WebServer {
  url: string;
  db: Db;
  web: WebChannel;
  /** The group folders' root the file endpoint serves from. */
  groupsDir: string;
  metrics: Metrics;
  history: History | undefined;
  /** The counts behind the client bounds. */
  bounds: ClientBounds;
  /** Ids the sink stored, in order (the gateway would wake its poll loop for each). */
  woken: number[];
  status: StatusSnapshot;
  logText(): string;
  close(): Promise<void>;
}

/** Starts the whole HTTP surface as gated would, with the groups `demo` (and any others) registered. */
export async function startWebServer(opts: WebServerOptions = {}): Promise<WebServer> {
  const { db } = freshDb();
  for (const g of opts.groups ?? ['demo'])
    db.prepare('INSERT INTO registered_groups (folder, name) VALUES (?, ?)').run(g, g);
  const chunks: string[] = [];
  const log: Logger = opts.captureLog
    ? pino(
        { level: 'debug' },
        new Writable({
          write(chunk, _enc, cb) {
            chunks.push(String(chunk));
            cb();
          },
        }),
      )
    : pino({ level: 'silent' });
  const metrics = createMetrics();
  const web = new WebChannel(db, { uploadsDir: tempDir('gated-uploads-') });
  const groupsDir = opts.groupsDir ?? tempDir('gated-groups-');
  const woken: number[] = [];
  const sink: InboundSink = (m) => {
    const id = insertInbound(db, m);
    if (id !== null) woken.push(id);
    return id;
  };
  const status = opts.status ?? emptyStatus();
  const history = opts.history ? new History(db, { retainDays: 14 }) : undefined;
  const bounds = new ClientBounds(opts.clientCaps ?? DEFAULT_CLIENT_CAPS, opts.now);
  const app = createHttpApp({
    history,
    ...(opts.admin ? { admin: opts.admin } : {}),
    db,
    config: {
      adminToken: opts.adminToken,
      groupsDir,
      ...(opts.maxAttachmentBytes !== undefined ? { maxAttachmentBytes: opts.maxAttachmentBytes } : {}),
    },
    bounds,
    log,
    metrics,
    web,
    sink,
    status: () => status,
    pingRuntime: opts.pingRuntime,
    now: opts.now,
    ...(opts.hooks ? { hooks: opts.hooks } : {}),
    ...(opts.channels ? { channels: opts.channels } : {}),
  });
  const server = await startHttpServer(app, { host: '127.0.0.1', port: 0 });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await web.stop();
    await server.close();
  };
  closers.push(close);
  return {
    url: server.url,
    db,
    web,
    groupsDir,
    metrics,
    history,
    bounds,
    woken,
    status,
    logText: () => chunks.join(''),
    close,
  };
}

/** Inserts an outbound row for a web chat and delivers it through the channel, as the outbox would. */
export async function reply(
  s: Pick<WebServer, 'db' | 'web'>,
  folder: string,
  topic: string,
  content: string,
  kind: 'reply' | 'gateway' | 'error' | 'status' = 'reply',
): Promise<number> {
  const info = s.db
    .prepare(
      `INSERT INTO messages (chat_jid, sender, content, topic, is_from_me, delivery, kind)
       VALUES (?, 'gated', ?, ?, 1, 'pending', ?)`,
    )
    .run(`web:${folder}`, content, topic, kind);
  const id = Number(info.lastInsertRowid);
  await s.web.send({
    messageId: id,
    chatJid: `web:${folder}`,
    text: content,
    part: 0,
    parts: 1,
    replyTo: null,
    topic,
    previousPartId: null,
  });
  s.db.prepare(`UPDATE messages SET delivery = 'sent' WHERE id = ?`).run(id);
  return id;
}

/** A browser's identity as gated issued it: the cookie to send back and the sender it stands for. */
export interface Visit {
  cookie: string;
  /** The visitor id (messages.sender of its posts). */
  sender: string;
  headers: Record<string, string>;
}

/** Asks gated for a visitor id, as a browser's first request does, and keeps the cookie it sets. */
export async function visit(url: string, headers: Record<string, string> = {}): Promise<Visit> {
  const res = await fetch(`${url}/api/chat/me`, { headers });
  const body = (await res.json()) as { sender: string };
  const set = res.headers.getSetCookie().map((c) => c.split(';')[0]!);
  const cookie = set.join('; ');
  return { cookie, sender: body.sender.replace(/^web:/, ''), headers: { ...headers, cookie } };
}

/** POSTs JSON and returns status and parsed body. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** GETs JSON and returns status and parsed body. */
export async function getJson(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A request with any headers, Host included (fetch does not let a test forge Host). */
export function rawRequest(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { hostname: u.hostname, port: u.port, path: u.pathname + u.search, method: opts.method ?? 'GET' },
      (res) => {
        let body = '';
        res.on('data', (b: Buffer) => (body += b.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    for (const [k, v] of Object.entries(opts.headers ?? {})) req.setHeader(k, v);
    req.on('error', reject);
    req.end(opts.body);
  });
}
