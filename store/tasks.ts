import { UsageError } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { nextDue, planSchedule, shortestGap, type Schedule, type TaskKind } from '../core/schedule.js';
import { isoNow, isValidFolder, parseJid, PLATFORM_RE, TOPIC_RE } from '../core/types.js';
import type { Db } from './db.js';
import { insertOutbound } from './messages.js';

/** Where a task is: `active` (fires when due), `paused` (by an operator or after failures), `done` (`at`). */
export type TaskStatus = 'active' | 'paused' | 'done';

/** One row of `tasks` (docs/TASKS.md). Times are UTC ISO-8601. */
export interface TaskRow {
  id: number;
  group_folder: string;
  topic: string;
  chat_jid: string;
  kind: TaskKind;
  spec: string;
  text: string;
  status: TaskStatus;
  next_run_at: string | null;
  last_run_at: string | null;
  anchor_at: string;
  failures: number;
  error: string | null;
  created_by: string;
  created_at: string;
}

/** A task as an operator (CLI, dashboard) or an agent (`schedule` action) asks for it. */
export interface NewTask {
  group: string;
  topic?: string;
  chat_jid: string;
  kind: TaskKind;
  /** As written: a cron pattern, a duration, an ISO time. */
  spec: string;
  text: string;
  /** cli | dashboard | agent:<group>. */
  created_by?: string;
  /**
   * Bounds for a task an agent asks for (docs/SECURITY.md): the shortest gap between due times and how many
   * active tasks the group may have. Operators' tasks (CLI, dashboard) have none.
   */
  bounds?: TaskBounds;
}

/** What an agent's `schedule` may cause (GATED_TASK_MIN_INTERVAL_MS, GATED_TASKS_PER_GROUP). */
export interface TaskBounds {
  minIntervalMs: number;
  maxActive: number;
}

/** Longest task text accepted (it becomes a message's content). */
export const MAX_TASK_TEXT = 16 * 1024;

function prepare(db: Db) {
  return {
    insert: db.prepare(
      `INSERT INTO tasks (group_folder, topic, chat_jid, kind, spec, text, next_run_at, anchor_at, created_by,
                          created_at)
       VALUES (@group, @topic, @chat_jid, @kind, @spec, @text, @next, @anchor, @created_by, @anchor)`,
    ),
    group: db.prepare('SELECT 1 FROM registered_groups WHERE folder = ?').pluck(),
    activeCount: db
      .prepare(`SELECT count(*) FROM tasks WHERE group_folder = ? AND status = 'active'`)
      .pluck(),
    get: db.prepare('SELECT * FROM tasks WHERE id = ?'),
    list: db.prepare('SELECT * FROM tasks ORDER BY id'),
    pause: db.prepare(
      `UPDATE tasks SET status = 'paused', error = @error WHERE id = @id AND status = 'active'`,
    ),
    resume: db.prepare(
      `UPDATE tasks SET status = 'active', failures = 0, error = NULL, next_run_at = @next
       WHERE id = @id AND status = 'paused'`,
    ),
    remove: db.prepare('DELETE FROM tasks WHERE id = ?'),
    // Normalized, so a time an operator wrote by hand in another ISO shape still compares correctly.
    nextDue: db
      .prepare(
        `SELECT min(strftime('%Y-%m-%dT%H:%M:%fZ', next_run_at)) FROM tasks
         WHERE status = 'active' AND next_run_at IS NOT NULL`,
      )
      .pluck(),
    due: db.prepare(
      `SELECT * FROM tasks WHERE status = 'active' AND next_run_at IS NOT NULL
         AND strftime('%Y-%m-%dT%H:%M:%fZ', next_run_at) <= ? ORDER BY next_run_at, id`,
    ),
    claimDue: db.prepare(
      `INSERT INTO task_runs (task_id, due_at, due_count, fired_at) VALUES (@task, @due, @count, @at)
       ON CONFLICT (task_id, due_at) DO NOTHING`,
    ),
    inbound: db.prepare(
      `INSERT INTO messages (chat_jid, sender, sender_name, content, verb, topic, timestamp, state, group_folder,
                             session_topic, target, weight, ready_at)
       VALUES (@chat, @sender, @sender_name, @content, 'task', @topic, @at, 'ready', @group, @topic,
               @target, 0, @now)`,
    ),
    linkRun: db.prepare('UPDATE task_runs SET message_id = ? WHERE id = ?'),
    advance: db.prepare(
      `UPDATE tasks SET next_run_at = @next, last_run_at = @at,
         status = CASE WHEN @next IS NULL THEN 'done' ELSE status END
       WHERE id = @id`,
    ),
    openRuns: db.prepare(
      `SELECT r.id, r.task_id, r.failures_seen, m.state, m.attempts FROM task_runs r
       JOIN messages m ON m.id = r.message_id WHERE r.outcome IS NULL`,
    ),
    closeRun: db.prepare('UPDATE task_runs SET outcome = @outcome, failures_seen = @seen WHERE id = @id'),
    seeRun: db.prepare('UPDATE task_runs SET failures_seen = @seen WHERE id = @id'),
    addFailures: db.prepare('UPDATE tasks SET failures = failures + @n WHERE id = @id'),
    resetFailures: db.prepare('UPDATE tasks SET failures = 0 WHERE id = ?'),
  };
}

type Statements = ReturnType<typeof prepare>;
const cache = new WeakMap<Db, Statements>();

function stmts(db: Db): Statements {
  let s = cache.get(db);
  if (!s) cache.set(db, (s = prepare(db)));
  return s;
}

/** The schedule part of a row, as the due-time functions take it. */
export function scheduleOf(t: Pick<TaskRow, 'kind' | 'spec' | 'anchor_at'>): Schedule {
  return { kind: t.kind, spec: t.spec, anchorMs: Date.parse(t.anchor_at) };
}

/**
 * Checks a new task and inserts it with its first due time. Refuses (UsageError naming the problem) an
 * unregistered group, a bad topic or chat JID, an empty or oversized text and a bad schedule. Returns the
 * new id. Safe inside the caller's transaction (the `schedule` action runs in the block's).
 */
export function addTask(db: Db, t: NewTask, now: number, tz: string): number {
  const s = stmts(db);
  if (!isValidFolder(t.group) || s.group.get(t.group) === undefined)
    throw new UsageError(`no group '${t.group}'`);
  const topic = t.topic ?? '';
  if (topic !== '' && !TOPIC_RE.test(topic)) throw new UsageError(`bad topic '${topic}'`);
  const { platform, room } = parseJid(t.chat_jid);
  if (!PLATFORM_RE.test(platform) || room === '')
    throw new UsageError(`bad chat '${t.chat_jid}': write platform:room, e.g. telegram:-100123 or web:demo`);
  if (t.text.trim() === '') throw new UsageError('the task text is empty');
  if (t.text.length > MAX_TASK_TEXT) throw new UsageError(`the task text is longer than ${MAX_TASK_TEXT}`);
  const plan = planSchedule(t.kind, t.spec, now, tz);
  if (t.bounds) checkBounds(s, t, t.bounds, now, tz);
  const info = s.insert.run({
    group: t.group,
    topic,
    chat_jid: t.chat_jid,
    kind: t.kind,
    spec: plan.spec,
    text: t.text,
    next: isoNow(plan.first),
    anchor: isoNow(plan.anchorMs),
    created_by: t.created_by ?? 'cli',
  });
  return Number(info.lastInsertRowid);
}

/** Refuses an agent's task that fires more often than allowed, or one too many for its group. */
function checkBounds(s: ReturnType<typeof stmts>, t: NewTask, b: TaskBounds, now: number, tz: string): void {
  const gap = shortestGap(t.kind, t.spec, now, tz);
  if (gap !== null && gap < b.minIntervalMs) {
    throw new UsageError(
      `a task may fire at most every ${formatDuration(b.minIntervalMs)}; '${t.spec}' fires ${formatDuration(gap)} apart`,
    );
  }
  const active = s.activeCount.get(t.group) as number;
  if (active >= b.maxActive) {
    throw new UsageError(`group '${t.group}' already has ${active} active tasks (at most ${b.maxActive})`);
  }
}

/** Every task, by id. */
export function listTasks(db: Db): TaskRow[] {
  return stmts(db).list.all() as TaskRow[];
}

/** One task, or undefined. */
export function getTask(db: Db, id: number): TaskRow | undefined {
  return stmts(db).get.get(id) as TaskRow | undefined;
}

/** Pauses an active task (its due times are skipped until resumed). False when it was not active. */
export function pauseTask(db: Db, id: number, error: string | null = null): boolean {
  return stmts(db).pause.run({ id, error }).changes > 0;
}

/**
 * Resumes a paused task: failures reset, next due time the first one after now (due times that passed
 * while it was paused do not fire). False when it was not paused.
 */
export function resumeTask(db: Db, id: number, now: number, tz: string): boolean {
  const t = getTask(db, id);
  if (!t || t.status !== 'paused') return false;
  const next = nextDue(scheduleOf(t), now, tz);
  if (next === null) {
    // An `at` task whose time passed while paused has nothing left to do.
    return (
      db.prepare(`UPDATE tasks SET status = 'done', next_run_at = NULL WHERE id = ?`).run(id).changes > 0
    );
  }
  return stmts(db).resume.run({ id, next: isoNow(next) }).changes > 0;
}

/** Deletes a task (its past firings stay in task_runs and messages). False when there was none. */
export function removeTask(db: Db, id: number): boolean {
  return stmts(db).remove.run(id).changes > 0;
}

/** An open firing and what its inbound row went through so far. */
export interface OpenTaskRun {
  id: number;
  task_id: number;
  failures_seen: number;
  state: string | null;
  attempts: number;
}

/**
 * The scheduler's statements (gateway/tasks.ts), prepared once per connection. The scheduler decides; this
 * only reads and writes rows, inside the transactions the scheduler opens.
 */
export class TaskStore {
  private readonly s: Statements;

  constructor(private readonly db: Db) {
    this.s = stmts(db);
  }

  /** The earliest due time of an active task, epoch ms, or null. */
  nextDueAt(): number | null {
    const v = this.s.nextDue.get() as string | null;
    return v ? Date.parse(v) : null;
  }

  /** Active tasks due at or before `now`. */
  due(now: number): TaskRow[] {
    return this.s.due.all(isoNow(now)) as TaskRow[];
  }

  /** True when the group is registered. */
  groupExists(folder: string): boolean {
    return this.s.group.get(folder) !== undefined;
  }

  /**
   * One firing: claims the due time (a due time already fired is not fired again: the unique key makes
   * that a no-op), inserts the task's inbound row straight into its session (state 'ready', no routing, no
   * access check) and advances the task. Call inside a transaction. Returns the new row's id, or null when
   * the due time had fired before.
   */
  fire(t: TaskRow, due: { latest: number; count: number; next: number | null }, now: number): number | null {
    const at = isoNow(now);
    const claim = this.s.claimDue.run({ task: t.id, due: isoNow(due.latest), count: due.count, at });
    let id: number | null = null;
    if (claim.changes > 0) {
      id = Number(
        this.s.inbound.run({
          chat: t.chat_jid,
          sender: `task:${t.id}`,
          sender_name: `task ${t.id}`,
          content: t.text,
          topic: t.topic,
          at,
          group: t.group_folder,
          target: `task:${t.id}`,
          now,
        }).lastInsertRowid,
      );
      this.s.linkRun.run(id, Number(claim.lastInsertRowid));
    }
    this.s.advance.run({ id: t.id, next: due.next === null ? null : isoNow(due.next), at });
    return id;
  }

  /** Firings whose outcome is not known yet. */
  openRuns(): OpenTaskRun[] {
    return this.s.openRuns.all() as OpenTaskRun[];
  }

  /** Records what a firing's run(s) did: failures added to the task, the firing closed or not. */
  recordRun(run: OpenTaskRun, outcome: 'ok' | 'failed' | 'stopped' | null, seen: number): void {
    if (seen > run.failures_seen) this.s.addFailures.run({ id: run.task_id, n: seen - run.failures_seen });
    if (outcome === 'ok') this.s.resetFailures.run(run.task_id);
    if (outcome === null) this.s.seeRun.run({ id: run.id, seen });
    else this.s.closeRun.run({ id: run.id, outcome, seen });
  }

  /** Pauses a task gated gave up on, with one notice to its chat. Returns the notice's outbound id. */
  pauseWithNotice(t: TaskRow, error: string, notice: string): number | null {
    if (this.s.pause.run({ id: t.id, error }).changes === 0) return null;
    return insertOutbound(this.db, { chat_jid: t.chat_jid, content: notice, kind: 'error', topic: t.topic });
  }
}
