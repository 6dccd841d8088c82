import { Hono } from 'hono';
import type { History } from '../store/history.js';
import { Inspect, MAX_PAGE } from './inspect.js';

/** The chart ranges the dashboard offers: how far back, and how many minutes make one point. */
export const RANGES = {
  hour: { minutes: 60, step: 1 },
  day: { minutes: 24 * 60, step: 5 },
  week: { minutes: 7 * 24 * 60, step: 30 },
} as const;

/** What the history, chat and run views read. */
export interface ViewDeps {
  inspect: Inspect;
  history: History | undefined;
  now: () => number;
}

/** A positive integer query value, or undefined when absent; NaN when present but not one. */
function intQuery(v: string | undefined): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  return Number.isInteger(n) && n > 0 ? n : NaN;
}

/** A page size from the query: default 100, at most MAX_PAGE. */
function pageSize(v: string | undefined): number {
  const n = intQuery(v);
  return n === undefined || Number.isNaN(n) ? 100 : Math.min(n, MAX_PAGE);
}

/** The history, chat and run views' JSON (mounted under /api/dashboard; read access). */
export function viewsApi(deps: ViewDeps): Hono {
  const { inspect, history, now } = deps;
  const app = new Hono();

  app.get('/history', (c) => {
    const name = c.req.query('range') ?? 'hour';
    if (!(name in RANGES))
      return c.json({ error: `range must be one of ${Object.keys(RANGES).join(', ')}` }, 400);
    const r = RANGES[name as keyof typeof RANGES];
    // Not an error: the page says so instead of drawing empty charts.
    if (!history) return c.json({ range: name, off: true, step: r.step, minutes: [], series: {} });
    const t = now();
    const to = Math.floor(t / 60_000) + 1;
    return c.json({
      range: name,
      keptDays: history.retainDays,
      ...history.range(to - r.minutes, to, r.step, t),
    });
  });

  app.get('/chats', (c) => {
    const q = c.req.query('q')?.trim();
    return c.json({ chats: inspect.chats(q || undefined, pageSize(c.req.query('limit'))) });
  });

  app.get('/chat', (c) => {
    const jid = c.req.query('jid')?.trim();
    if (!jid) return c.json({ error: 'jid is required (e.g. telegram:-100123)' }, 400);
    const before = intQuery(c.req.query('before'));
    if (Number.isNaN(before)) return c.json({ error: 'before must be a positive message id' }, 400);
    const limit = pageSize(c.req.query('limit'));
    const rows = inspect.chat({
      chatJid: jid,
      text: c.req.query('q')?.trim() || undefined,
      sender: c.req.query('sender')?.trim() || undefined,
      before,
      limit,
    });
    // A full page may have more behind it: the page asks again with before = the last id shown.
    const more = rows.length === limit ? rows[rows.length - 1]!.id : null;
    return c.json({ chat_jid: jid, messages: rows, next_before: more });
  });

  app.get('/run/:id', (c) => {
    const id = intQuery(c.req.param('id'));
    if (id === undefined || Number.isNaN(id))
      return c.json({ error: 'run id must be a positive integer' }, 400);
    const view = inspect.run(id);
    if (!view) return c.json({ error: `no run ${id}` }, 404);
    return c.json(view);
  });

  return app;
}
