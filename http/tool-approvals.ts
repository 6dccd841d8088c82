import { Hono, type Context } from 'hono';
import type { Logger } from '../core/log.js';
import { withActorWhenWritable } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { shownInput } from '../delivery/approval-text.js';
import { normalizeToolCode, toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';
import { DASHBOARD_ACTOR } from './access.js';
import type { Auth } from './auth.js';

/** Options of the tool approvals API. */
export interface ToolApprovalsApiOptions {
  db: Db;
  auth: Auth;
  log: Logger;
  now: () => number;
  /** A decision was stored: the waiting run should hear it now (the broker's wake), not on its timer. */
  decided?: () => void;
}

/** What the page shows of a row (the input's JSON and the run's ids stay in the database). */
function view(a: ToolApproval) {
  return {
    code: a.code,
    group_folder: a.group_folder,
    topic: a.topic,
    chat_jid: a.chat_jid,
    tool: a.tool,
    input_line: a.input_line,
    // The input as it would run, whole (the chat may show only its head and tail).
    input: shownInput(a),
    summary: a.summary,
    approvers: a.approvers,
    state: a.state,
    note: a.note,
    decided_by: a.decided_by,
    created_at: a.created_at,
    expires_at: a.expires_at,
    decided_at: a.decided_at,
    used_at: a.used_at,
  };
}

/** The note of a rejection from a JSON body, if any (at most 2000 characters, like a typed one). */
async function noteOf(c: Context): Promise<string | null> {
  if (!/^application\/json\b/i.test(c.req.header('content-type') ?? '')) return null;
  const body = (await c.req.json().catch(() => null)) as { note?: unknown } | null;
  const note = typeof body?.note === 'string' ? body.note.trim().slice(0, 2000) : '';
  return note || null;
}

/**
 * The dashboard's tool approvals (docs/APPROVALS.md, "Dashboard"), mounted at /api/approvals: `GET /` the
 * pending questions (oldest first) and the last decided ones (newest first), by the dashboard's read rule;
 * `POST /:code/approve` and `POST /:code/reject` (JSON `{"note"}` optional) with the admin token, decided as
 * `dashboard:admin-token` and audited so. The first decision wins: a decided code answers 409.
 */
export function toolApprovalsApi(opts: ToolApprovalsApiOptions): Hono {
  const { db, log, now } = opts;
  const store = toolApprovalsOf(db);
  const app = new Hono();

  app.get('/', opts.auth.read, (c) =>
    c.json({ pending: store.pending().map(view), decided: store.recent().map(view), now: now() }),
  );

  for (const approve of [true, false]) {
    app.post(`/:code/${approve ? 'approve' : 'reject'}`, opts.auth.admin, async (c) => {
      const code = normalizeToolCode(c.req.param('code'));
      const row = code === undefined ? undefined : store.byCode(code);
      if (!code || !row) return c.json({ error: `no tool approval ${c.req.param('code')}` }, 404);
      const note = approve ? null : await noteOf(c);
      const done = await withActorWhenWritable(db, DASHBOARD_ACTOR, () =>
        store.decide(code, approve, DASHBOARD_ACTOR, note, now()),
      );
      if (!done) return c.json({ error: `${code} was already decided (${store.byCode(code)?.state})` }, 409);
      log.info(
        { code, tool: done.tool, group: done.group_folder, approve },
        'tool call decided on the dashboard',
      );
      opts.decided?.();
      return c.json({ ok: true, approval: view(done) });
    });
  }
  return app;
}
