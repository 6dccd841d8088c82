import type { Workflow } from '../core/workflow-file.js';
import { isoNow } from '../core/types.js';
import type { Db } from './db.js';
import { insertOutbound } from './messages.js';
import { toolApprovalsOf, type ToolApproval } from './tool-approvals.js';

/**
 * Workflow runs and their events (docs/WORKFLOWS.md), one named statement per operation, prepared once. The
 * engine (gateway/workflows.ts) decides; this only reads and writes rows, inside its transactions.
 */

export type WorkflowRunState = 'running' | 'done' | 'failed' | 'rejected' | 'cancelled';

/** One `workflow_runs` row. */
export interface WorkflowRunRow {
  id: number;
  group_folder: string;
  name: string;
  file: string;
  arguments: string;
  definition: string;
  chat_jid: string;
  thread: string;
  started_by: string;
  state: WorkflowRunState;
  note: string | null;
  created_at: number;
  ended_at: number | null;
}

export type WorkflowEventKind =
  'started' | 'asked' | 'done' | 'approved' | 'failed' | 'rejected' | 'cancelled' | 'resumed' | 'ended';

/** One `workflow_events` row. */
export interface WorkflowEvent {
  id: number;
  run_id: number;
  step: string | null;
  kind: WorkflowEventKind;
  attempt: number;
  message_id: number | null;
  approval_id: number | null;
  output: string | null;
  note: string | null;
  at: number;
}

/** A new run as `/workflow run` starts it. */
export interface NewWorkflowRun {
  group_folder: string;
  name: string;
  file: string;
  arguments: string;
  workflow: Workflow;
  chat_jid: string;
  thread: string;
  started_by: string;
  now: number;
}

/** The inbound row of one step attempt: a normal row of the step's own session, ready at once. */
export interface StepRow {
  runId: number;
  step: string;
  attempt: number;
  group: string;
  topic: string;
  chatJid: string;
  thread: string;
  content: string;
  workflow: string;
  now: number;
}

/** A workflow step's session topic: one session (and lane) per run and step. */
export function stepTopic(runId: number, step: string): string {
  return `wf${runId}-${step}`;
}

/** The run and step a session topic belongs to, or undefined for any other topic. */
export function stepOfTopic(topic: string): { runId: number; step: string } | undefined {
  const m = /^wf(\d+)-([a-z0-9][a-z0-9_-]*)$/.exec(topic);
  return m ? { runId: Number(m[1]), step: m[2]! } : undefined;
}

function prepare(db: Db) {
  return {
    insertRun: db.prepare(
      `INSERT INTO workflow_runs (group_folder, name, file, arguments, definition, chat_jid, thread, started_by,
                                  created_at)
       VALUES (@group_folder, @name, @file, @arguments, @definition, @chat_jid, @thread, @started_by, @now)`,
    ),
    run: db.prepare('SELECT * FROM workflow_runs WHERE id = ?'),
    running: db.prepare(`SELECT * FROM workflow_runs WHERE state = 'running' ORDER BY id`),
    anyRunning: db.prepare(`SELECT 1 FROM workflow_runs WHERE state = 'running' LIMIT 1`).pluck(),
    ofChat: db.prepare('SELECT * FROM workflow_runs WHERE chat_jid = ? ORDER BY id DESC LIMIT ?'),
    recent: db.prepare('SELECT * FROM workflow_runs ORDER BY id DESC LIMIT ?'),
    setState: db.prepare(
      `UPDATE workflow_runs SET state = @state, note = @note, ended_at = @ended
       WHERE id = @id AND state = @from`,
    ),
    events: db.prepare('SELECT * FROM workflow_events WHERE run_id = ? ORDER BY id'),
    addEvent: db.prepare(
      `INSERT INTO workflow_events (run_id, step, kind, attempt, message_id, approval_id, output, note, at)
       VALUES (@run_id, @step, @kind, @attempt, @message_id, @approval_id, @output, @note, @at)`,
    ),
    inbound: db.prepare(
      `INSERT INTO messages (chat_jid, sender, sender_name, content, verb, topic, timestamp, state, group_folder,
                             session_topic, target, weight, ready_at)
       VALUES (@chat, @sender, @sender_name, @content, 'workflow', @thread, @at, 'ready', @group, @topic,
               @target, 0, @now)`,
    ),
    message: db.prepare('SELECT state, error FROM messages WHERE id = ?'),
    replies: db
      .prepare(
        `SELECT content FROM messages WHERE reply_to_id = ? AND is_from_me = 1 AND kind = 'reply' ORDER BY id`,
      )
      .pluck(),
    stopRows: db.prepare(
      `UPDATE messages SET state = 'stopped', error = @error
       WHERE id = @id AND state IN ('ready', 'held')`,
    ),
    definition: db.prepare('SELECT definition FROM workflow_runs WHERE id = ?').pluck(),
  };
}

type Statements = ReturnType<typeof prepare>;
const cache = new WeakMap<Db, Statements>();

/** The statements of workflow runs and events. */
export class WorkflowStore {
  private readonly s: Statements;

  constructor(private readonly db: Db) {
    let s = cache.get(db);
    if (!s) cache.set(db, (s = prepare(db)));
    this.s = s;
  }

  /** Stores a new running run; its id. */
  insertRun(r: NewWorkflowRun): number {
    const { workflow, ...rest } = r;
    return Number(this.s.insertRun.run({ ...rest, definition: JSON.stringify(workflow) }).lastInsertRowid);
  }

  run(id: number): WorkflowRunRow | undefined {
    return this.s.run.get(id) as WorkflowRunRow | undefined;
  }

  /** The workflow a run runs, as it was parsed when the run started. */
  definition(run: Pick<WorkflowRunRow, 'definition'>): Workflow {
    return JSON.parse(run.definition) as Workflow;
  }

  /** The agent and model a step's session runs with (null: the group's), or undefined for other topics. */
  stepChoice(group: string, topic: string): { agent: string | null; model: string | null } | undefined {
    const at = stepOfTopic(topic);
    if (!at) return undefined;
    const run = this.run(at.runId);
    if (!run || run.group_folder !== group) return undefined;
    const step = this.definition(run).steps.find((s) => s.name === at.step);
    if (!step || step.kind !== 'agent') return undefined;
    return { agent: step.agent, model: step.model };
  }

  /** Running runs, oldest first. */
  running(): WorkflowRunRow[] {
    return this.s.running.all() as WorkflowRunRow[];
  }

  /** Whether any run is running (a read: an idle look takes no lock). */
  anyRunning(): boolean {
    return this.s.anyRunning.get() !== undefined;
  }

  /** A chat's runs, newest first. */
  ofChat(chatJid: string, limit = 10): WorkflowRunRow[] {
    return this.s.ofChat.all(chatJid, limit) as WorkflowRunRow[];
  }

  /** Every run, newest first. */
  recent(limit = 50): WorkflowRunRow[] {
    return this.s.recent.all(limit) as WorkflowRunRow[];
  }

  /** Moves a run from state `from` to `state`; false when it was not in `from` (someone else moved it). */
  setState(
    id: number,
    from: WorkflowRunState,
    state: WorkflowRunState,
    note: string | null,
    now: number,
  ): boolean {
    const ended = state === 'running' ? null : now;
    return this.s.setState.run({ id, from, state, note, ended }).changes === 1;
  }

  events(runId: number): WorkflowEvent[] {
    return this.s.events.all(runId) as WorkflowEvent[];
  }

  addEvent(
    e: Omit<WorkflowEvent, 'id' | 'attempt' | 'message_id' | 'approval_id' | 'output' | 'note'> &
      Partial<Pick<WorkflowEvent, 'attempt' | 'message_id' | 'approval_id' | 'output' | 'note'>>,
  ): number {
    return Number(
      this.s.addEvent.run({
        attempt: 0,
        message_id: null,
        approval_id: null,
        output: null,
        note: null,
        ...e,
      }).lastInsertRowid,
    );
  }

  /** Starts one step attempt: its inbound row and its 'started' event (call inside a transaction). */
  startStep(r: StepRow): number {
    const id = Number(
      this.s.inbound.run({
        chat: r.chatJid,
        sender: `workflow:${r.runId}`,
        sender_name: `workflow ${r.workflow} #${r.runId}`,
        content: r.content,
        thread: r.thread,
        at: isoNow(r.now),
        group: r.group,
        topic: r.topic,
        target: `workflow:${r.runId}/${r.step}`,
        now: r.now,
      }).lastInsertRowid,
    );
    this.addEvent({
      run_id: r.runId,
      step: r.step,
      kind: 'started',
      attempt: r.attempt,
      message_id: id,
      at: r.now,
    });
    return id;
  }

  /** Where a step's row is: its state (null: not polled) and error. */
  message(id: number): { state: string | null; error: string | null } | undefined {
    return this.s.message.get(id) as { state: string | null; error: string | null } | undefined;
  }

  /** The agent's answers to a step's row, in order. */
  replies(messageId: number): string[] {
    return this.s.replies.all(messageId) as string[];
  }

  /** A step row not yet taken by a run is stopped (a cancelled run); true when it was. */
  stopRow(id: number, error: string): boolean {
    return this.s.stopRows.run({ id, error }).changes === 1;
  }

  /** Asks a gate: a tool_approvals row the chat is asked about like any tool question (run_id NULL). */
  askGate(g: {
    run: WorkflowRunRow;
    step: string;
    attempt: number;
    question: string;
    approvers: string;
    timeoutMs: number;
    now: number;
  }): ToolApproval {
    const row = toolApprovalsOf(this.db).insertGate({
      group_folder: g.run.group_folder,
      topic: g.run.thread,
      chat_jid: g.run.chat_jid,
      ask_id: `workflow:${g.run.id}:${g.step}`,
      tool: `workflow ${g.run.name}/${g.step}`,
      input_json: JSON.stringify({ workflow: g.run.name, run: g.run.id, gate: g.step }),
      input_line: g.question,
      approvers: g.approvers,
      created_at: g.now,
      expires_at: g.now + g.timeoutMs,
    });
    this.addEvent({
      run_id: g.run.id,
      step: g.step,
      kind: 'asked',
      attempt: g.attempt,
      approval_id: row.id,
      at: g.now,
    });
    return row;
  }

  /** Tells the run's chat something (an outbound row of kind 'gateway'); its id. */
  tell(run: Pick<WorkflowRunRow, 'chat_jid' | 'thread'>, content: string): number {
    return insertOutbound(this.db, { chat_jid: run.chat_jid, content, kind: 'gateway', topic: run.thread });
  }
}
