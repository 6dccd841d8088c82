import { Hono } from 'hono';
import type { Logger } from '../core/log.js';
import type { BusyMode } from '../core/types.js';
import { withActorWhenWritable } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { setBusyMode } from '../store/groups.js';
import { DASHBOARD_ACTOR } from './access.js';

const MODES: readonly BusyMode[] = ['queue', 'steer', 'interrupt'];

/**
 * A group's settings edited from the dashboard (mounted under /api/groups, behind the admin token):
 * `POST /busy` with `{"folder": …, "mode": "queue"|"steer"|"interrupt"}` sets what a message does while the
 * group's agent works on a turn, as `gated groups busy` does, audited as the dashboard's token. The running
 * gateway reads the row at the next message.
 */
export function groupsAdminApi(db: Db, log: Logger): Hono {
  const app = new Hono();
  app.post('/busy', async (c) => {
    const b = (await c.req.json().catch(() => null)) as Record<string, unknown> | null;
    const folder = typeof b?.folder === 'string' ? b.folder.trim() : '';
    const mode = b?.mode;
    if (folder === '') return c.json({ error: 'send JSON {"folder":"…","mode":"…"}' }, 400);
    if (typeof mode !== 'string' || !MODES.includes(mode as BusyMode))
      return c.json({ error: `bad busy mode '${String(mode)}': 'queue', 'steer' or 'interrupt'` }, 400);
    const set = await withActorWhenWritable(db, DASHBOARD_ACTOR, () =>
      setBusyMode(db, folder, mode as BusyMode),
    );
    if (!set) return c.json({ error: `no group ${folder}` }, 404);
    log.info({ group: folder, busy: mode }, 'busy mode set from the dashboard');
    return c.json({ folder, busy: mode });
  });
  return app;
}
