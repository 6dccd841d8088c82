import { Hono } from 'hono';
import type { Logger } from '../core/log.js';
import { withActorWhenWritable } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { listGroups } from '../store/groups.js';
import { MemoryStore, type Fact } from '../store/memory.js';

/** A fact as the dashboard shows it: the row, its provenance parsed. */
export interface FactView extends Omit<Fact, 'provenance'> {
  provenance: unknown;
  score?: number;
}

function view(f: Fact & { score?: number }): FactView {
  let provenance: unknown = null;
  try {
    provenance = JSON.parse(f.provenance);
  } catch {
    provenance = f.provenance;
  }
  return { ...f, provenance };
}

/**
 * `GET /api/memory?group=G[&q=WORDS]` (behind the dashboard's read check): the registered groups, and the
 * facts of group G (docs/MEMORY.md), oldest first, or with `q` those sharing words with it, best first.
 */
export function memoryReadApi(db: Db): Hono {
  const app = new Hono();
  app.get('/', (c) => {
    const groups = listGroups(db).map((g) => g.folder);
    const group = c.req.query('group') ?? '';
    if (group === '') return c.json({ groups, facts: [] });
    if (!groups.includes(group)) return c.json({ error: `no group '${group}'` }, 404);
    const q = (c.req.query('q') ?? '').slice(0, 4096);
    const store = new MemoryStore(db);
    const facts = q.trim() === '' ? store.list(group, undefined, 500) : store.search(group, q, 100);
    return c.json({ groups, facts: facts.map(view) });
  });
  return app;
}

/** `POST /api/memory/:id/delete` (behind the admin token): forgets a fact, audited as `dashboard`. */
export function memoryAdminApi(db: Db, log: Logger): Hono {
  const app = new Hono();
  app.post('/:id/delete', async (c) => {
    const id = Number(c.req.param('id'));
    if (!Number.isSafeInteger(id) || id < 1)
      return c.json({ error: `bad fact id '${c.req.param('id')}'` }, 400);
    const store = new MemoryStore(db);
    const fact = store.get(id);
    if (!fact) return c.json({ error: `no fact with id ${id}` }, 404);
    await withActorWhenWritable(db, 'dashboard', () => store.forget(id));
    log.info({ fact: id, group: fact.group_folder }, 'fact forgotten from the dashboard');
    return c.json({ deleted: id });
  });
  return app;
}
