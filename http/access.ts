import { Hono, type Context } from 'hono';
import type { Logger } from '../core/log.js';
import { describeDecision } from '../gateway/access.js';
import { accessReport } from '../store/access-report.js';
import { ApprovalStore, releaseLimited } from '../store/approvals.js';
import { listAudit, withActorWhenWritable } from '../store/audit.js';
import type { Db } from '../store/db.js';
import type { Auth } from './auth.js';

/** Who the audit trail names for a change made from the dashboard: whoever holds the admin token. */
export const DASHBOARD_ACTOR = 'dashboard:admin-token';

/** Options of the access API. */
export interface AccessApiOptions {
  db: Db;
  /** GATED_ADMINS, shown as owners of every group. */
  admins: string[];
  auth: Auth;
  log: Logger;
  now: () => number;
}

/** A string field of a JSON or form body, or undefined. */
async function fieldOf(c: Context, name: string): Promise<string | undefined> {
  const type = c.req.header('content-type') ?? '';
  const body = /^application\/json\b/i.test(type)
    ? ((await c.req.json().catch(() => null)) as Record<string, unknown> | null)
    : ((await c.req.parseBody()) as Record<string, unknown>);
  const v = body && typeof body === 'object' ? body[name] : undefined;
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/**
 * The access panel's API (docs/ACCESS.md, "Dashboard"), mounted at /api/access. Reading (`GET /`) follows
 * the dashboard's rule (local client or admin token); deciding a pairing code (`POST /approve`,
 * `POST /reject`, body `code`) and releasing a chat's limited messages (`POST /release`, body `chat_jid`)
 * need the admin token. Changes are audited as made by the dashboard's token.
 */
export function accessApi(opts: AccessApiOptions): Hono {
  const { db, log, now } = opts;
  const approvals = new ApprovalStore(db);
  const cols = 'id, chat_jid, sender, sender_name, content, timestamp, state, group_folder, error AS reason';
  // The withheld states from their partial indexes, named: for the ORDER BY the planner would rather read
  // the whole table backwards from its newest row (all of it when fewer than 100 rows are withheld).
  const withheld = db.prepare(
    `SELECT ${cols} FROM messages INDEXED BY idx_messages_pending WHERE state = 'pending'
     UNION ALL SELECT ${cols} FROM messages INDEXED BY idx_messages_limited WHERE state = 'limited'
     UNION ALL SELECT ${cols} FROM messages WHERE id > ? AND state = 'denied'
     ORDER BY id DESC LIMIT 100`,
  );
  const lastId = db.prepare('SELECT coalesce(max(id), 0) FROM messages').pluck();
  const app = new Hono();

  app.get('/', opts.auth.read, (c) => {
    const t = now();
    // Denied rows have no index of their own; only the recent end of the table is looked at.
    const recent = Math.max(0, (lastId.get() as number) - 5000);
    return c.json({
      ...accessReport(db, opts.admins, t),
      withheld: withheld.all(recent),
      audit: listAudit(db, { limit: 100 }),
      now: t,
    });
  });

  for (const approve of [true, false]) {
    app.post(approve ? '/approve' : '/reject', opts.auth.admin, async (c) => {
      const code = await fieldOf(c, 'code');
      if (!code) return c.json({ error: 'code is required' }, 400);
      const d = await withActorWhenWritable(db, DASHBOARD_ACTOR, () =>
        approvals.decide(code, approve, DASHBOARD_ACTOR, now()),
      );
      const text = describeDecision(d, approve);
      if (!d.ok) return c.json({ error: text }, d.approval ? 409 : 404);
      log.info(
        { code: d.approval.code, group: d.approval.group_folder, approve },
        'pairing code decided on the dashboard',
      );
      return c.json({ ok: true, text, messages: d.messages });
    });
  }

  app.post('/release', opts.auth.admin, async (c) => {
    const chat = await fieldOf(c, 'chat_jid');
    if (!chat) return c.json({ error: 'chat_jid is required' }, 400);
    const n = await withActorWhenWritable(db, DASHBOARD_ACTOR, () => releaseLimited(db, chat, now()));
    return c.json({ ok: true, released: n });
  });

  return app;
}
