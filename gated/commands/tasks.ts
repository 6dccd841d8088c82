import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import type { TaskKind } from '../../core/schedule.js';
import { addTask, getTask, listTasks, pauseTask, removeTask, resumeTask } from '../../store/tasks.js';
import { audited } from './access.js';
import { action, intArg, type CliContext } from '../context.js';

/** Options of `gated tasks add`. */
export interface TaskAddOptions {
  group: string;
  topic?: string;
  chat: string;
  cron?: string;
  every?: string;
  at?: string;
}

/** The one schedule `tasks add` was given: exactly one of --cron, --every, --at. */
export function scheduleOption(opts: Pick<TaskAddOptions, 'cron' | 'every' | 'at'>): {
  kind: TaskKind;
  spec: string;
} {
  const given = (['cron', 'every', 'at'] as const).filter((k) => opts[k] !== undefined);
  if (given.length !== 1) {
    throw new UsageError(
      given.length === 0
        ? 'say when: one of --cron, --every or --at'
        : `give one schedule, not ${given.map((k) => '--' + k).join(' and ')}`,
    );
  }
  const kind = given[0]!;
  return { kind, spec: opts[kind]! };
}

/** `gated tasks list | add | pause | resume | rm`. */
export function tasksCommand(program: Command): void {
  const tasks = program.command('tasks').description('scheduled tasks: a message to a group on a schedule');
  tasks
    .command('list')
    .description('every task with its schedule, status, next and last run')
    .action(action((ctx) => listTaskLines(ctx)));
  addTaskCommand(tasks);
  taskStateCommands(tasks);
}

/** `gated tasks list`: one tab-separated line per task, after a header. */
function listTaskLines(ctx: CliContext): void {
  const cols = ['id', 'status', 'group', 'topic', 'chat', 'kind', 'spec', 'next_run_at', 'last_run_at'];
  ctx.out([...cols, 'failures', 'text'].join('\t'));
  for (const t of listTasks(ctx.db({ readOnly: true }))) {
    const cells = [t.id, t.status, t.group_folder, t.topic, t.chat_jid, t.kind, t.spec];
    ctx.out([...cells, t.next_run_at ?? '', t.last_run_at ?? '', t.failures, oneLine(t.text)].join('\t'));
  }
}

/** `gated tasks add`. */
function addTaskCommand(tasks: Command): void {
  tasks
    .command('add')
    .description('add a task; when due, TEXT reaches the group as a message (verb task) answered in --chat')
    .requiredOption('--group <folder>', 'the group that runs it')
    .option('--topic <topic>', 'the session topic (default: the default topic)')
    .requiredOption('--chat <jid>', 'where the answers go, e.g. telegram:-100123 or web:demo')
    .option('--cron <pattern>', '5-field cron pattern in GATED_TZ, e.g. "0 9 * * 1-5"')
    .option('--every <duration>', 'an interval such as 15m or 1h30m (first run one interval from now)')
    .option('--at <time>', 'once, at an ISO time (without an offset: in GATED_TZ)')
    .argument('<text...>', 'what the agent receives')
    .action(
      action((ctx, words: string[], opts: TaskAddOptions) => {
        const { kind, spec } = scheduleOption(opts);
        const db = ctx.db({ create: true });
        const id = audited(
          ctx,
          (adb) =>
            addTask(
              adb,
              {
                group: opts.group,
                ...(opts.topic !== undefined ? { topic: opts.topic.replace(/^#/, '') } : {}),
                chat_jid: opts.chat,
                kind,
                spec,
                text: words.join(' '),
                created_by: 'cli',
              },
              Date.now(),
              ctx.config.tz,
            ),
          { create: true },
        );
        ctx.out(`task ${id} added, next run ${getTask(db, id)?.next_run_at ?? '?'}`);
      }),
    );
}

/** `gated tasks pause | resume | rm`. */
function taskStateCommands(tasks: Command): void {
  tasks
    .command('pause')
    .description('stop firing a task until it is resumed')
    .argument('<id>')
    .action(
      action((ctx, id: string) => {
        const n = taskId(ctx.db(), id);
        if (!audited(ctx, (db) => pauseTask(db, n))) throw new UsageError(`task ${n} is not active`);
        ctx.out(`task ${n} paused`);
      }),
    );

  tasks
    .command('resume')
    .description('fire a paused task again (from its next due time; failures reset)')
    .argument('<id>')
    .action(
      action((ctx, id: string) => {
        const db = ctx.db();
        const n = taskId(db, id);
        if (!audited(ctx, (adb) => resumeTask(adb, n, Date.now(), ctx.config.tz)))
          throw new UsageError(`task ${n} is not paused`);
        ctx.out(`task ${n} resumed, next run ${getTask(db, n)?.next_run_at ?? 'none (done)'}`);
      }),
    );

  tasks
    .command('rm')
    .description('delete a task')
    .argument('<id>')
    .action(
      action((ctx, id: string) => {
        const n = intArg('id', id);
        if (!audited(ctx, (db) => removeTask(db, n))) throw new UsageError(`no task with id ${n}`);
        ctx.out(`task ${n} removed`);
      }),
    );
}

function taskId(db: Parameters<typeof getTask>[0], raw: string): number {
  const n = intArg('id', raw);
  if (!getTask(db, n)) throw new UsageError(`no task with id ${n}`);
  return n;
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 60 ? flat.slice(0, 59) + '…' : flat;
}
