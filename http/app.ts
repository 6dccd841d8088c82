import type { Logger } from '../core/log.js';
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { secureHeaders } from 'hono/secure-headers';
import { accessApi } from './access.js';
import { adminApi } from './admin.js';
import { createAuth } from './auth.js';
import { admitUploads, ClientBounds, DEFAULT_CLIENT_CAPS, limitTokenGuesses } from './bounds.js';
import { ChatReaders } from './chat-view.js';
import { chatRoutes } from './chat.js';
import { chatFileRoutes, dashboardAudioRoutes } from './chat-files.js';
import { dashboardRoutesApi } from './dashboard.js';
import { groupsAdminApi } from './groups-admin.js';
import { hostGuard } from './guard.js';
import { healthApi, metricsApi } from './health.js';
import { cookieKey, identify, identityRoutes, WebIdentity } from './identity.js';
import { Inspect } from './inspect.js';
import { Queries } from './queries.js';
import { routesAdminApi } from './routes-admin.js';
import { waitingApi, workflowsApi } from './workflows.js';
import { staticApi } from './static.js';
import { memoryAdminApi, memoryReadApi } from './memory.js';
import { tasksAdminApi, tasksReadApi } from './tasks.js';
import { toolApprovalsApi } from './tool-approvals.js';
import { AccessSource } from '../store/access.js';
import { RouteSource } from '../store/routes.js';
import { committed } from '../store/group-commit.js';
import type { HttpAppOptions } from './types.js';
import { viewsApi } from './views.js';

export { startHttpServer, type HttpServer, type ListenOptions } from './server.js';
export {
  emptyStatus,
  type HeldChat,
  type HttpAppOptions,
  type LaneInfo,
  type LaneState,
  type StatusSnapshot,
} from './types.js';

/** Largest request body any endpoint accepts, but the chat's upload. */
export const MAX_BODY_BYTES = 300 * 1024;

/** Largest webhook delivery: a GitHub payload carries an issue's and a comment's bodies (64 KiB each). */
export const MAX_HOOK_BYTES = 5 * 1024 * 1024;

/** The default of GATED_MAX_ATTACHMENT_BYTES, for an app built without it. */
const DEFAULT_MAX_ATTACHMENT = 20 * 1024 * 1024;

/** Room for the multipart framing and the text fields of an upload, on top of its files. */
const UPLOAD_OVERHEAD = MAX_BODY_BYTES;

/**
 * The HTTP surface of gated as one hono app: the web chat (`/`, `/api/chat/*`), the dashboard
 * (`/dashboard`, `/api/dashboard/*`), route and group edits (`/api/routes`, `/api/groups`, admin token),
 * `/metrics` and `/healthz`.
 * See docs/WEB.md. If the gateway has not started the web channel yet, it is started here with `sink`.
 */
export function createHttpApp(opts: HttpAppOptions): Hono {
  const { db, config, log, metrics, web, sink } = opts;
  const now = opts.now ?? Date.now;
  const q = new Queries(db);
  const auth = createAuth(config.adminToken);
  const httpLog = log.child({ mod: 'http' });
  if (!web.started) void web.start(sink);
  const app = new Hono();
  useFront(app, opts);
  app.use(hostGuard({ bound: config.httpHost, extra: config.httpHosts }));
  app.use(auth.noTokenInUrl);
  const bounds = opts.bounds ?? new ClientBounds({ ...DEFAULT_CLIENT_CAPS, ...config.clientCaps }, now);
  // Wrong admin tokens are bounded per client address before any path checks one.
  app.use(limitTokenGuesses(bounds));
  // Every chat request knows its sender from the cookie gated issued (the page's first load sets it).
  const identity = new WebIdentity(cookieKey(db), config.adminToken, now);
  app.use('/', identify(identity));
  app.use('/api/chat/*', identify(identity));
  // Uploads are admitted (or refused with 429) before any body limit reads a byte of them.
  const maxAttachment = config.maxAttachmentBytes ?? DEFAULT_MAX_ATTACHMENT;
  app.use('/api/chat/upload', admitUploads(bounds, maxAttachment + UPLOAD_OVERHEAD));
  useBodyLimits(app, maxAttachment);
  logRequests(app, httpLog);
  // Before the wait below: /healthz writes nothing and shows no row, so its answer does not wait for the
  // turn's COMMIT (a load balancer's probe would otherwise time the group commit, not gated's liveness).
  app.route('/healthz', healthApi(q, opts.pingRuntime, opts.health));
  // An answer leaves once what its handler wrote or read is committed: with group commit a post, an
  // operator's edit or a row it shows may still be in the turn's open group (store/group-commit.ts).
  app.use(async (_c, next) => {
    await next();
    await committed(db);
  });

  app.use('/metrics', auth.read);
  app.route('/metrics', metricsApi(metrics));
  const readers = new ChatReaders(new AccessSource(db, config.admins ?? []));
  app.route('/api/chat', identityRoutes(identity));
  app.route('/api/chat', chatRoutes({ q, web, log: httpLog, readers, bounds }));
  app.route(
    '/api/chat',
    chatFileRoutes({
      q,
      web,
      log: httpLog,
      groupsDir: config.groupsDir,
      maxBytes: maxAttachment,
      readers,
    }),
  );
  useOperatorApis(app, opts, { q, auth, log: httpLog, now });
  app.route('/', staticApi());

  app.notFound((c) => c.json({ error: 'not found' }, 404));
  app.onError((err, c) => {
    httpLog.error({ err, method: c.req.method, path: c.req.path }, 'request failed');
    return c.json({ error: 'internal error' }, 500);
  });
  return app;
}

/**
 * The operator's side: the dashboard's reads, admin actions, route and group edits, tasks, tool approvals and access,
 * each behind the dashboard's read token or the admin token.
 */
function useOperatorApis(
  app: Hono,
  opts: HttpAppOptions,
  ctx: { q: Queries; auth: ReturnType<typeof createAuth>; log: Logger; now: () => number },
): void {
  const { db, config, metrics, status } = opts;
  const { q, auth, now } = ctx;
  const httpLog = ctx.log;
  app.use('/api/dashboard/*', auth.read);
  const routes = opts.routes ?? new RouteSource(db);
  app.route(
    '/api/dashboard',
    dashboardRoutesApi({
      q,
      status,
      now,
      routes,
      cluster: () => ({
        ...metrics.cluster(),
        ...(config.runtime !== undefined ? { runtime: config.runtime } : {}),
      }),
      ...(opts.channels ? { channels: opts.channels } : {}),
    }),
  );
  app.route('/api/dashboard', viewsApi({ inspect: new Inspect(db), history: opts.history, now }));
  app.route('/api/dashboard', dashboardAudioRoutes({ q, log: httpLog, groupsDir: config.groupsDir }));
  app.use('/api/admin/*', auth.admin);
  app.route('/api/admin', adminApi(opts.admin, httpLog));
  app.use('/api/routes', auth.admin);
  app.use('/api/routes/*', auth.admin);
  app.route('/api/routes', routesAdminApi(db, httpLog));
  app.use('/api/groups/*', auth.admin);
  app.route('/api/groups', groupsAdminApi(db, httpLog));
  // Memory: reading and searching as the dashboard, forgetting with the admin token (docs/MEMORY.md).
  app.on('GET', ['/api/memory', '/api/memory/*'], auth.read);
  app.on('POST', ['/api/memory', '/api/memory/*'], auth.admin);
  app.route('/api/memory', memoryReadApi(db));
  app.route('/api/memory', memoryAdminApi(db, httpLog));
  // Tasks: reading as the dashboard, pausing and resuming with the admin token (docs/TASKS.md).
  app.on('GET', ['/api/tasks', '/api/tasks/*'], auth.read);
  app.on('POST', ['/api/tasks', '/api/tasks/*'], auth.admin);
  app.route('/api/tasks', tasksReadApi(db));
  app.route(
    '/api/tasks',
    tasksAdminApi({
      db,
      log: httpLog,
      tz: config.tz ?? 'UTC',
      now,
      ...(opts.tasksChanged ? { changed: opts.tasksChanged } : {}),
    }),
  );
  app.route(
    '/api/approvals',
    toolApprovalsApi({
      db,
      auth,
      log: httpLog,
      now,
      ...(opts.toolDecided ? { decided: opts.toolDecided } : {}),
    }),
  );
  app.route('/api/access', accessApi({ db, admins: config.admins ?? [], auth, log: httpLog, now }));
  // Workflow runs followed live, and one list of everything waiting on a person (docs/WORKFLOWS.md).
  app.on('GET', ['/api/workflows', '/api/workflows/*', '/api/waiting'], auth.read);
  app.route('/api/workflows', workflowsApi(db));
  app.route('/api/waiting', waitingApi(db, now));
}

/**
 * What every request meets first: security headers (and a sandbox for the files agents wrote), then the
 * platform webhooks, which come before the Host/Origin guard.
 */
function useFront(app: Hono, opts: HttpAppOptions): void {
  const hookLimit = bodyLimit({
    maxSize: MAX_HOOK_BYTES,
    onError: (c) => c.json({ error: 'request body too large' }, 413),
  });
  // Set after every other header middleware (this one wraps them all): a file an agent wrote is never a
  // page of this origin, whatever its type.
  const sandboxed: MiddlewareHandler = async (c, next) => {
    await next();
    c.res.headers.set('Content-Security-Policy', "default-src 'none'; sandbox");
  };
  app.use('/api/chat/file', sandboxed);
  app.use('/api/dashboard/audio', sandboxed);
  app.use(
    secureHeaders({
      // The pages load only their own script and style files: no inline code, nothing from elsewhere.
      contentSecurityPolicy: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        // The dashboard plays a chat's audio from a blob it fetched with the admin token (docs/VOICE.md).
        mediaSrc: ["'self'", 'blob:'],
        connectSrc: ["'self'"],
        frameAncestors: ["'none'"],
        formAction: ["'self'"],
      },
      referrerPolicy: 'no-referrer',
    }),
  );
  // Platform webhooks come before the Host/Origin guard: Slack and GitHub post with the public name of a
  // reverse proxy as Host, and each request proves itself with its HMAC signature, which a page in a
  // browser (what the guard keeps out) cannot make. Only POST /hooks/<platform> skips it (docs/WEB.md).
  app.post('/hooks/:platform', hookLimit, async (c) => {
    const hook = opts.hooks?.(c.req.param('platform'));
    if (!hook)
      return c.json({ error: 'no webhook for this platform here (not configured, or not started yet)' }, 503);
    return hook(c.req.raw);
  });
}

/** The body limits: a small one for every API request, the attachment limit for an upload. */
function useBodyLimits(app: Hono, maxAttachment: number): void {
  // A message is at most 65,536 characters (up to 4 bytes each in UTF-8) plus a little JSON; nothing an
  // endpoint accepts is larger, and the parsers buffer whole bodies.
  const small = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => c.json({ error: 'request body too large' }, 413),
  });
  // An upload may carry files up to GATED_MAX_ATTACHMENT_BYTES; the limit counts the bytes as they arrive,
  // so a lying or absent Content-Length is cut off too.
  const upload = bodyLimit({
    maxSize: maxAttachment + UPLOAD_OVERHEAD,
    onError: (c) => c.json({ error: `upload over the limit of ${maxAttachment} bytes` }, 413),
  });
  app.use('/api/*', (c, next) => (c.req.path === '/api/chat/upload' ? upload(c, next) : small(c, next)));
}

/** One debug line per request: method, path (never the query), status, time. */
function logRequests(app: Hono, httpLog: HttpAppOptions['log']): void {
  app.use(async (c, next) => {
    const t0 = performance.now();
    await next();
    // The path only: query strings may carry user text, and headers may carry the token.
    httpLog.debug(
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - t0),
      },
      'request',
    );
  });
}
