import { Hono, type Context } from 'hono';
import { UsageError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { checkRoute } from '../router/index.js';
import type { Db } from '../store/db.js';
import { addRoute, removeRoute } from '../store/routes.js';

/** A route as an operator asks to add it (`gated routes add --seq N --match '…' TARGET`). */
export interface NewRoute {
  seq: number;
  match: string;
  target: string;
  impulse_config: string | null;
}

/**
 * Checks a new route exactly as `gated routes add` does: the router's checkRoute (keys, globs, target
 * syntax, impulse_config), so a row is refused for the same reasons it would never match. Throws
 * UsageError with the CLI's one-line message.
 */
export function validateNewRoute(row: NewRoute): NewRoute {
  if (!Number.isSafeInteger(row.seq)) throw new UsageError(`seq must be an integer, got '${row.seq}'`);
  const reason = checkRoute(row);
  if (reason) throw new UsageError(`route refused: ${reason}`);
  return row;
}

/** Reads a string field from a JSON or form body. */
async function bodyOf(c: Context): Promise<Record<string, unknown>> {
  const type = c.req.header('content-type') ?? '';
  if (/^application\/json\b/i.test(type)) {
    const b = (await c.req.json().catch(() => null)) as unknown;
    if (!b || typeof b !== 'object' || Array.isArray(b)) throw new UsageError('body must be a JSON object');
    return b as Record<string, unknown>;
  }
  return (await c.req.parseBody()) as Record<string, unknown>;
}

function field(b: Record<string, unknown>, k: string): string | undefined {
  const v = b[k];
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  return undefined;
}

/**
 * Route edits (mounted under /api/routes behind the admin middleware): `POST /` adds a row, `DELETE /:id`
 * and `POST /:id/delete` (for plain HTML forms) remove one. The running gateway picks the change up by its
 * next poll through the routes_version trigger, as with an edit made in sqlite3.
 */
export function routesAdminApi(db: Db, log: Logger): Hono {
  const app = new Hono();

  app.post('/', async (c) => {
    try {
      const b = await bodyOf(c);
      const seqText = field(b, 'seq')?.trim() ?? '0';
      if (!/^-?\d+$/.test(seqText)) throw new UsageError(`seq must be an integer, got '${seqText}'`);
      const target = field(b, 'target');
      if (target === undefined) throw new UsageError('target is required');
      const impulse = field(b, 'impulse_config');
      const row = validateNewRoute({
        seq: Number(seqText),
        match: field(b, 'match') ?? '',
        target,
        // An empty form field means "no impulse_config", as an omitted --impulse does.
        impulse_config: impulse?.trim() ? impulse : null,
      });
      const id = addRoute(db, row);
      log.info(
        { route: id, seq: row.seq, match: row.match, target: row.target },
        'route added from the dashboard',
      );
      return c.json({ id, ...row }, 201);
    } catch (err) {
      if (err instanceof UsageError) return c.json({ error: err.message }, 400);
      throw err;
    }
  });

  const remove = (c: Context) => {
    const raw = c.req.param('id') ?? '';
    if (!/^\d+$/.test(raw)) return c.json({ error: `bad route id '${raw}'` }, 400);
    const id = Number(raw);
    if (!removeRoute(db, id)) return c.json({ error: `no route with id ${id}` }, 404);
    log.info({ route: id }, 'route removed from the dashboard');
    return c.json({ id, removed: true });
  };
  app.delete('/:id', remove);
  app.post('/:id/delete', remove);

  return app;
}
