import { Hono } from 'hono';
import type { Logger } from '../core/log.js';

/** What an admin may do to a live gated from the dashboard; provided by the wiring in gated/. */
export interface AdminActions {
  /** Ends a live run (as /stop does). False when that run is not running here. */
  stopRun(runId: number): Promise<boolean>;
  /** Puts a chat's parked rows back in the queue. Gives how many. */
  retryChat(chatJid: string): number | Promise<number>;
  /** Puts a chat's `limited` rows back into the pipeline; absent until access limits exist. */
  releaseChat?: (chatJid: string) => number | Promise<number>;
}

async function chatOf(body: Promise<unknown>): Promise<string | undefined> {
  const b = (await body.catch(() => undefined)) as { chat_jid?: unknown } | undefined;
  const jid = b?.chat_jid;
  return typeof jid === 'string' && jid.trim() !== '' ? jid.trim() : undefined;
}

/** POST endpoints for the run and chat views (mounted under /api/admin, behind the admin token). */
export function adminApi(actions: AdminActions | undefined, log: Logger): Hono {
  const app = new Hono();
  app.use(async (c, next) => {
    if (!actions) return c.json({ error: 'admin actions are not available in this process' }, 503);
    return next();
  });

  app.post('/runs/:id/stop', async (c) => {
    const id = Number(c.req.param('id'));
    if (!Number.isInteger(id) || id <= 0) return c.json({ error: 'run id must be a positive integer' }, 400);
    const stopped = await actions!.stopRun(id);
    log.info({ runId: id, stopped }, 'admin: stop run');
    return stopped ? c.json({ stopped: true }) : c.json({ error: `run ${id} is not running` }, 409);
  });

  app.post('/chats/retry', async (c) => {
    const jid = await chatOf(c.req.json());
    if (!jid) return c.json({ error: 'send JSON {"chat_jid":"…"}' }, 400);
    const rows = await actions!.retryChat(jid);
    log.info({ chat: jid, rows }, 'admin: retry parked rows');
    return c.json({ retried: rows });
  });

  app.post('/chats/release', async (c) => {
    if (!actions!.releaseChat) {
      return c.json(
        { error: 'releasing limited rows needs access limits, which this gated does not have' },
        501,
      );
    }
    const jid = await chatOf(c.req.json());
    if (!jid) return c.json({ error: 'send JSON {"chat_jid":"…"}' }, 400);
    const rows = await actions!.releaseChat(jid);
    log.info({ chat: jid, rows }, 'admin: release limited rows');
    return c.json({ released: rows });
  });

  return app;
}
