import { Hono, type Context } from 'hono';
import { UsageError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { withActorWhenWritable } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { danglingTarget } from '../store/dangling.js';
import { addCheckedRoute, removeRoute } from '../store/routes.js';

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
      const row = {
        seq: Number(seqText),
        match: field(b, 'match') ?? '',
        target,
        // An empty form field means "no impulse_config", as an omitted --impulse does.
        impulse_config: impulse?.trim() ? impulse : null,
      };
      const id = await withActorWhenWritable(db, 'dashboard', () => addCheckedRoute(db, row));
      log.info(
        { route: id, seq: row.seq, match: row.match, target: row.target },
        'route added from the dashboard',
      );
      // Accepted (the group may come next), with what it points to named when that is nowhere yet.
      const warning = danglingTarget(db, row.target);
      return c.json({ id, ...row, ...(warning ? { warning } : {}) }, 201);
    } catch (err) {
      if (err instanceof UsageError) return c.json({ error: err.message }, 400);
      throw err;
    }
  });

  const remove = async (c: Context) => {
    const raw = c.req.param('id') ?? '';
    if (!/^\d+$/.test(raw)) return c.json({ error: `bad route id '${raw}'` }, 400);
    const id = Number(raw);
    if (!(await withActorWhenWritable(db, 'dashboard', () => removeRoute(db, id))))
      return c.json({ error: `no route with id ${id}` }, 404);
    log.info({ route: id }, 'route removed from the dashboard');
    return c.json({ id, removed: true });
  };
  app.delete('/:id', remove);
  app.post('/:id/delete', remove);

  return app;
}
