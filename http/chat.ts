import { Hono, type Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { UsageError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { isValidFolder, TOPIC_RE } from '../core/types.js';
import {
  toChatLine,
  webJid,
  type ChatLine,
  type ChatRow,
  type WebChannel,
  type WebEvent,
  type WebPost,
} from '../channels/web/index.js';
import { clientAddress, type ClientBounds } from './bounds.js';
import { lineSeen, type ChatReaders } from './chat-view.js';
import type { Viewer } from './identity.js';
import type { Queries } from './queries.js';

/** What the chat API needs. */
export interface ChatDeps {
  q: Queries;
  web: WebChannel;
  log: Logger;
  /** What each viewer may read of a chat. */
  readers: ChatReaders;
  /** The caps on open streams. */
  bounds: ClientBounds;
  /** Milliseconds between SSE keep-alive comments (default 15 s). */
  keepAliveMs?: number;
}

const REPLAY_PAGE = 500;
const HISTORY_MAX = REPLAY_PAGE;

/** One SSE stream: its chat topic, its replay cursor, and who follows it. */
interface Follow {
  jid: string;
  topic: string;
  cursor: number | undefined;
  folder: string;
  viewer: Viewer;
}

/** A chat topic named by query parameters, checked against registered_groups. */
function chatParams(c: Context, q: Queries): { folder: string; topic: string } | Response {
  const folder = c.req.query('group') ?? '';
  const topic = c.req.query('topic') ?? '';
  if (!isValidFolder(folder)) return c.json({ error: `bad group folder '${folder}'` }, 400);
  if (topic !== '' && !TOPIC_RE.test(topic)) return c.json({ error: `bad topic '${topic}'` }, 400);
  if (!q.hasGroup(folder)) return c.json({ error: `no group '${folder}'` }, 404);
  return { folder, topic };
}

/** Stored rows of a chat as the chat shows them, each with its files and the approval it asks or tells. */
function linesOf(q: Queries, web: WebChannel, jid: string, rows: readonly ChatRow[]): ChatLine[] {
  const files = q.chatFiles(rows.map((r) => r.id));
  const approvals = web.approvalLines.of(jid, rows);
  return rows.map((r) => {
    const line = toChatLine(r);
    const f = files.get(r.id);
    const a = approvals.get(r.id);
    return { ...line, ...(f ? { files: f } : {}), ...(a ? { approval: a } : {}) };
  });
}

/** A query parameter or header that must be a whole number of at most 15 digits, else undefined. */
export function nonNegInt(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,15}$/.test(raw.trim())) return undefined;
  return Number(raw.trim());
}

/**
 * The fields of a chat post from a JSON body (`/send`) or a multipart form (`/upload`): text fields only,
 * anything else counts as absent; the web channel checks them. The sender is the `visitor` gated issued
 * to the browser (http/identity.ts), never a field of the request.
 */
export function chatPostFields(form: Record<string, unknown>, visitor: string): WebPost {
  const str = (k: string) => (typeof form[k] === 'string' ? (form[k] as string) : undefined);
  return {
    folder: str('group') ?? '',
    topic: str('topic') ?? '',
    content: str('content') ?? '',
    visitor,
    senderName: str('name'),
    clientMsgId: str('clientMsgId'),
  };
}

/**
 * The web chat's API: groups to pick from, history, posting, and the reply stream.
 *
 * SSE protocol (`GET /api/chat/stream?group=&topic=&after=`): `message` events carry one ChatLine as JSON;
 * `typing` events carry `{"on":bool}`; `draft` events carry `{"id","text"}`, the whole current text of the
 * topic's draft (text null: the draft is gone, its answer follows as a `message`). On connect the server replays every row of the topic after the
 * cursor (the Last-Event-ID header when the browser reconnects, else `after`; no cursor at all means live
 * only) as whole lines with `id:` set to their messages.id, at most 500 a response (a `more` event then
 * ends the response: the client reconnects from the last id), then follows live. A live reply arrives part by
 * part as the outbox splits it, and only its last part carries `id:`; a post is echoed without one. So the
 * cursor never passes a row the tab has not fully seen: a reply cut off by a disconnect, or one stored
 * before a post but delivered after it, is replayed whole on reconnect. The browser drops or replaces
 * lines by id.
 */
export function chatRoutes(deps: ChatDeps): Hono {
  const { q, web, log, readers, bounds } = deps;
  const app = new Hono();

  // Who the browser is (http/identity.ts): its sender, and whether it is the admin.
  app.get('/me', (c) => {
    const v = c.get('viewer');
    return c.json({ sender: `web:${v.sender}`, admin: v.admin });
  });

  app.get('/groups', (c) => c.json({ groups: q.groups().map((g) => ({ folder: g.folder, name: g.name })) }));

  // Other chats that share this topic's session (a terminal's `gated chat`, a platform chat routed here).
  app.get('/shared', (c) => {
    const p = chatParams(c, q);
    if (p instanceof Response) return p;
    // Which chats a members-only group talks in is the members' business, as its lines are.
    if (readers.only(p.folder, c.get('viewer')) !== null) return c.json({ chats: [] });
    return c.json({ chats: q.sharedChats(p.folder, p.topic, webJid(p.folder)) });
  });

  app.get('/history', (c) => {
    const p = chatParams(c, q);
    if (p instanceof Response) return p;
    const before = nonNegInt(c.req.query('before')) ?? Number.MAX_SAFE_INTEGER;
    const limit = Math.min(nonNegInt(c.req.query('limit')) ?? 200, HISTORY_MAX);
    const viewer = c.get('viewer');
    const only = readers.only(p.folder, viewer);
    const jid = webJid(p.folder);
    const lines = linesOf(q, web, jid, q.chatTail(jid, p.topic, before, limit, only));
    const restricted = readers.restriction(p.folder, viewer);
    return c.json({ group: p.folder, topic: p.topic, lines, ...(restricted ? { restricted } : {}) });
  });

  app.post('/send', async (c) => {
    if (!/^application\/json\b/i.test(c.req.header('content-type') ?? '')) {
      // JSON only: a cross-site form cannot post it without a CORS preflight, which is never granted.
      return c.json({ error: 'send application/json' }, 415);
    }
    const body = (await c.req.json().catch(() => null)) as Record<string, unknown> | null;
    if (!body || typeof body !== 'object') return c.json({ error: 'body must be a JSON object' }, 400);
    const post = chatPostFields(body, c.get('viewer').sender);
    if (!web.started) return c.json({ error: 'the web chat is not started' }, 503);
    if (isValidFolder(post.folder) && !q.hasGroup(post.folder))
      return c.json({ error: `no group '${post.folder}'` }, 404);
    try {
      const id = await web.post(post);
      return id === null ? c.json({ id: null, duplicate: true }, 200) : c.json({ id }, 201);
    } catch (err) {
      if (err instanceof UsageError) return c.json({ error: err.message }, 400);
      throw err;
    }
  });

  app.get('/stream', (c) => {
    const p = chatParams(c, q);
    if (p instanceof Response) return p;
    const jid = webJid(p.folder);
    const cursor = nonNegInt(c.req.header('last-event-id')) ?? nonNegInt(c.req.query('after'));
    const release = bounds.openStream(clientAddress(c));
    if (typeof release !== 'function') {
      return c.json({ error: release.reason }, 429, { 'Retry-After': String(release.retryAfterS) });
    }
    const view = { folder: p.folder, viewer: c.get('viewer') };
    return streamSSE(
      c,
      (stream) => follow(deps, stream, { jid, topic: p.topic, cursor, ...view }).finally(release),
      async (err) => {
        log.warn({ err, chat: jid, topic: p.topic }, 'web chat stream failed');
      },
    );
  });

  return app;
}

/**
 * One tab's stream: the replay after its cursor, then live events until the tab goes away. Subscribed
 * before the replay is read so nothing delivered in between is lost; duplicates are filtered by id.
 */
async function follow(deps: ChatDeps, stream: SSEStreamingApi, f: Follow): Promise<void> {
  const { q, web } = deps;
  const { jid, topic, cursor } = f;
  // Decided per event: an approval or a block mid-stream applies to the next line.
  const only = () => deps.readers.only(f.folder, f.viewer);
  const queue: WebEvent[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const unsubscribe = web.subscribe(jid, topic, (ev) => {
    queue.push(ev);
    wake?.();
  });
  stream.onAbort(() => {
    done = true;
    wake?.();
  });
  const keepAlive = setInterval(() => void stream.write(': keep-alive\n\n'), deps.keepAliveMs ?? 15_000);
  const sent = new Set<number>();
  try {
    await stream.writeSSE({
      event: 'ready',
      data: JSON.stringify({ group: jid.slice(4), topic }),
      retry: 1000,
    });
    if (cursor !== undefined && !done && (await replayPage(q, web, stream, f, only(), sent)) === 'more')
      return;
    // A tab that connects mid-turn starts from the draft shown now (memory only: none after a restart).
    const draft = web.currentDraft(jid, topic);
    // A viewer limited to its own rows gets neither the draft nor the indicator: the members' business.
    const member = only() === null;
    if (draft && !done && member) await stream.writeSSE({ event: 'draft', data: JSON.stringify(draft) });
    // Likewise the working indicator: shown only if the agent works now, never one that ended meanwhile.
    if (web.isWorking(jid) && !done && member)
      await stream.writeSSE({ event: 'typing', data: '{"on":true}' });
    while (!done) {
      const ev = queue.shift();
      if (!ev) {
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
        continue;
      }
      if (ev.type === 'close') break;
      // Typing and drafts are the agent's work for the members; a viewer limited to its own rows gets
      // only its own lines and the answers to them.
      if (!eventSeen(only(), ev)) continue;
      await writeEvent(stream, ev, sent);
    }
  } finally {
    clearInterval(keepAlive);
    unsubscribe();
  }
}

/**
 * One page of replay per response: a chat of 100k rows must not keep the event loop busy for seconds (other
 * requests, /healthz, the poll loop share it). When more rows remain, the stream ends with a `more` event
 * and the client opens the next page from the last id it got (EventSource's own reconnect with
 * Last-Event-ID does the same).
 */
async function replayPage(
  q: Queries,
  web: WebChannel,
  stream: SSEStreamingApi,
  f: Follow,
  only: string | null,
  sent: Set<number>,
): Promise<'all' | 'more'> {
  const rows = q.chatAfter(f.jid, f.topic, f.cursor!, REPLAY_PAGE, only);
  for (const line of linesOf(q, web, f.jid, rows)) {
    sent.add(line.id);
    await stream.writeSSE({ event: 'message', id: String(line.id), data: JSON.stringify(line) });
  }
  if (rows.length < REPLAY_PAGE) return 'all';
  await stream.writeSSE({
    event: 'more',
    data: JSON.stringify({ after: rows[rows.length - 1]!.id }),
    retry: 10,
  });
  return 'more';
}

/**
 * Whether a viewer sees a live event: every event for the members (`only` null); for a viewer limited to
 * its own rows, only its lines and the answers to them, and the files and transcripts of its own posts.
 */
function eventSeen(only: string | null, ev: Exclude<WebEvent, { type: 'close' }>): boolean {
  if (ev.type === 'message') return lineSeen(only, ev.line);
  if (ev.type === 'file' || ev.type === 'transcript') return only === null || ev.sender === only;
  return only === null;
}

/** One live event (not `close`) as SSE; a row the stream already showed whole is skipped. */
async function writeEvent(
  stream: SSEStreamingApi,
  ev: Exclude<WebEvent, { type: 'close' }>,
  sent: Set<number>,
): Promise<void> {
  if (ev.type === 'typing') return stream.writeSSE({ event: 'typing', data: JSON.stringify({ on: ev.on }) });
  if (ev.type === 'draft') return stream.writeSSE({ event: 'draft', data: JSON.stringify(ev.draft) });
  if (ev.type === 'file')
    return stream.writeSSE({ event: 'file', data: JSON.stringify({ id: ev.id, file: ev.file }) });
  if (ev.type === 'transcript')
    return stream.writeSSE({ event: 'transcript', data: JSON.stringify(ev.line) });
  // A row this stream already showed whole (replayed, or a post) needs none of its parts again.
  if (sent.has(ev.line.id)) return;
  if (ev.line.part === null) sent.add(ev.line.id);
  const id = ev.cursor ? { id: String(ev.line.id) } : {};
  await stream.writeSSE({ event: 'message', data: JSON.stringify(ev.line), ...id });
}
