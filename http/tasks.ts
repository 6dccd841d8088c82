import { Hono } from 'hono';
import type { Logger } from '../core/log.js';
import type { Db } from '../store/db.js';
import { whenWritable } from '../store/group-commit.js';
import { getTask, listTasks, pauseTask, resumeTask, type TaskRow } from '../store/tasks.js';

/** What the tasks endpoints need. */
export interface TasksApiOptions {
  db: Db;
  log: Logger;
  /** Time zone of cron tasks (GATED_TZ), for the next due time on resume. */
  tz: string;
  now: () => number;
  /** A task was paused or resumed: the task worker looks now (core/signals.ts `tasks`). */
  changed?: () => void;
}

/** A task as the dashboard shows it. */
export type TaskView = Pick<
  TaskRow,
  | 'id'
  | 'group_folder'
  | 'topic'
  | 'chat_jid'
  | 'kind'
  | 'spec'
  | 'text'
  | 'status'
  | 'next_run_at'
  | 'last_run_at'
  | 'failures'
  | 'error'
  | 'created_by'
>;

function view(t: TaskRow): TaskView {
  return {
    id: t.id,
    group_folder: t.group_folder,
    topic: t.topic,
    chat_jid: t.chat_jid,
    kind: t.kind,
    spec: t.spec,
    // A task's text is the operator's or an agent's prompt; the list shows its start.
    text: t.text.length > 200 ? t.text.slice(0, 199) + '…' : t.text,
    status: t.status,
    next_run_at: t.next_run_at,
    last_run_at: t.last_run_at,
    failures: t.failures,
    error: t.error,
    created_by: t.created_by,
  };
}

/** `GET /api/tasks`: every task with its next and last run (mounted behind the dashboard's read check). */
export function tasksReadApi(db: Db): Hono {
  const app = new Hono();
  app.get('/', (c) => c.json({ tasks: listTasks(db).map(view) }));
  return app;
}

/**
 * `POST /api/tasks/:id/pause` and `/resume` (mounted behind the admin token). A resumed task continues from
 * its next due time after now, failures reset, as `gated tasks resume` does.
 */
export function tasksAdminApi(opts: TasksApiOptions): Hono {
  const app = new Hono();
  const change = (verb: 'pause' | 'resume') =>
    app.post(`/:id/${verb}`, async (c) => {
      const id = Number(c.req.param('id'));
      if (!Number.isSafeInteger(id)) return c.json({ error: `bad task id '${c.req.param('id')}'` }, 400);
      if (!getTask(opts.db, id)) return c.json({ error: `no task with id ${id}` }, 404);
      const ok = await whenWritable(opts.db, () =>
        verb === 'pause' ? pauseTask(opts.db, id) : resumeTask(opts.db, id, opts.now(), opts.tz),
      );
      if (!ok) return c.json({ error: `task ${id} is not ${verb === 'pause' ? 'active' : 'paused'}` }, 409);
      opts.log.info({ task: id }, `task ${verb}d from the dashboard`);
      opts.changed?.();
      return c.json({ task: view(getTask(opts.db, id)!) });
    });
  change('pause');
  change('resume');
  return app;
}
