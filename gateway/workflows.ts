import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Signals } from '../core/signals.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { GateStep } from '../core/workflow-file.js';
import type { Db } from '../store/db.js';
import { whenWritable } from '../store/group-commit.js';
import { toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';
import {
  stepTopic,
  WorkflowStore,
  type WorkflowEvent,
  type WorkflowRunRow,
  type WorkflowRunState,
} from '../store/workflows.js';
import {
  retries,
  satisfied,
  stepPrompt,
  stepStates,
  type StepState,
  type StoredAgentStep,
} from './workflow-state.js';

/**
 * Runs workflows (docs/WORKFLOWS.md). Each step attempt is one inbound row of the step's own session,
 * inserted with its 'started' event in one transaction; the queue runs it like any message (its lane, the
 * global cap, answered once across crashes); this engine then reads the row's state and its answer and
 * writes the step's outcome as an event, and starts what that outcome allows, in one transaction. A gate
 * asks its chat through a tool_approvals row and reads the decision from it. All it knows is in rows, so a
 * kill -9 anywhere leaves nothing to repair: the next look finds the unfinished step where it was.
 *
 * It runs on the worker driver (core/worker.ts), woken by the signals below, like tasks: a look that finds
 * nothing to do reads a few rows and takes no write lock.
 */

/** What the engine needs; only gated/ constructs the real ones. */
export interface WorkflowEngineOptions {
  db: Db;
  log: Logger;
  now?: () => number;
  /**
   * It fires `queued` when step rows were made ready and `outbound` when it told the chat something; it
   * looks when `workflows` fires (a run was started, resumed or cancelled here), and, while a run is
   * running, when `outbound` fires (a step's answer, or a parked row's notice, was written) and when
   * `decided` does (a gate's decision); at the latest after `intervalMs` (another process's rows). With no
   * run running it does not hear `outbound` or `decided`: a message's answer does not wake it.
   */
  signals?: Pick<Signals, 'queued' | 'outbound' | 'decided' | 'workflows'>;
  intervalMs?: number;
  /**
   * Asks a gate's chat: delivery's approval messages (delivery/approvals.ts), made in the wiring and passed
   * down; without it the question waits for `unasked`.
   */
  asker?: GateAsker;
}

/** Who asks a gate's chat for its decision (the tool approvals' notifier). */
export interface GateAsker {
  ask(row: ToolApproval): void;
}

/** One change the engine will write for a run. */
type Move =
  | { kind: 'event'; event: NewEvent }
  | { kind: 'start'; state: StepState }
  | { kind: 'ask'; state: StepState }
  | { kind: 'end'; state: Exclude<WorkflowRunState, 'running'>; note: string };

type NewEvent = Pick<WorkflowEvent, 'step' | 'kind'> &
  Partial<Pick<WorkflowEvent, 'output' | 'note' | 'attempt'>>;

/** The row states in which a step's row will not be answered any more. */
const GIVEN_UP = new Set(['stopped', 'parked', 'failed', 'denied', 'dropped', 'unrouted']);

/** Drives the running workflow runs. */
export class WorkflowEngine {
  private readonly store: WorkflowStore;
  private readonly now: () => number;
  private readonly worker: Worker;
  private unlisten: () => void = () => {};
  /** Stops hearing `outbound` and `decided`; set while a run is running. */
  private unlistenRuns: (() => void) | null = null;

  constructor(private readonly opts: WorkflowEngineOptions) {
    this.store = new WorkflowStore(opts.db);
    this.now = opts.now ?? Date.now;
    this.worker = createWorker({
      name: 'workflows',
      log: opts.log,
      step: () => this.step(),
      intervalMs: opts.intervalMs ?? 1000,
      now: this.now,
    });
  }

  /** Starts looking; a run a restart interrupted goes on at once. */
  start(): void {
    const off = this.opts.signals?.workflows.on(() => this.worker.wake());
    this.unlisten = () => off?.();
    this.worker.start();
  }

  /** Stops looking; resolves once a look in flight has ended. Nothing is lost (runs are rows). */
  stop(): Promise<void> {
    this.unlisten();
    this.hearRuns(false);
    return this.worker.stop();
  }

  /** Hears the signals a running run's steps and gates answer by, only while some run is running. */
  private hearRuns(on: boolean): void {
    if (on === (this.unlistenRuns !== null)) return;
    if (!on) {
      this.unlistenRuns?.();
      this.unlistenRuns = null;
      return;
    }
    const wake = () => this.worker.wake();
    const off = [this.opts.signals?.outbound.on(wake), this.opts.signals?.decided.on(wake)];
    this.unlistenRuns = () => off.forEach((f) => f?.());
  }

  private step(): null | Promise<null> {
    const running = this.store.anyRunning();
    this.hearRuns(running);
    if (!running) return null;
    const moving = this.store.running().some((r) => this.movesOf(r).length > 0);
    return moving ? whenWritable(this.opts.db, () => this.work()) : null;
  }

  /** Advances every running run that has something to do, each in its own transaction. */
  private work(): null {
    const asked: ToolApproval[] = [];
    let queued = false;
    let told = false;
    for (const run of this.store.running()) {
      try {
        this.opts.db
          .transaction(() => {
            const fresh = this.store.run(run.id);
            if (fresh?.state !== 'running') return;
            for (const m of this.movesOf(fresh)) {
              const r = this.apply(fresh, m);
              if (r === 'queued') queued = true;
              else if (r === 'told') told = true;
              else if (r !== null) asked.push(r);
            }
          })
          .immediate();
      } catch (err) {
        this.opts.log.error(
          { run: run.id, err: coerceError(err).message },
          'advancing a workflow run failed',
        );
      }
    }
    if (queued) this.opts.signals?.queued.fire();
    if (told || asked.length > 0) this.opts.signals?.outbound.fire(undefined);
    for (const row of asked) this.opts.asker?.ask(row);
    return null;
  }

  /**
   * What a run needs written now, from its events and the rows they point at: outcomes of steps that
   * ended, then new attempts of what those allow, or the run's end. Only reads.
   */
  movesOf(run: WorkflowRunRow): Move[] {
    const wf = this.store.definition(run);
    const events = this.store.events(run.id);
    const moves: Move[] = [];
    let states = stepStates(wf, events);
    const seen: WorkflowEvent[] = [];
    for (const s of states.values()) {
      const e = this.outcomeOf(s);
      if (!e) continue;
      moves.push({ kind: 'event', event: e });
      seen.push({
        id: 0,
        run_id: run.id,
        attempt: s.attempt,
        message_id: null,
        approval_id: null,
        output: null,
        note: null,
        at: 0,
        ...e,
      });
    }
    if (seen.length > 0) states = stepStates(wf, [...events, ...seen]);
    const all = [...states.values()];
    const rejected = all.find((s) => s.status === 'rejected');
    if (rejected) return [...moves, { kind: 'end', state: 'rejected', note: endNote(rejected) }];
    const stopped = all.find((s) => s.status === 'failed' && !satisfied(s) && !retries(s));
    if (stopped) return [...moves, { kind: 'end', state: 'failed', note: endNote(stopped) }];
    for (const s of all) {
      const ready = s.status === 'waiting' || retries(s);
      if (!ready || !s.step.needs.every((n) => satisfied(states.get(n)!))) continue;
      moves.push({ kind: s.step.kind === 'gate' ? 'ask' : 'start', state: s });
    }
    if (all.every(satisfied))
      moves.push({ kind: 'end', state: 'done', note: `finished: ${all.length} steps` });
    return moves;
  }

  /** The outcome event of a step whose row was answered or given up, or whose gate was decided. */
  private outcomeOf(s: StepState): NewEvent | undefined {
    if (s.status === 'running' && s.messageId !== null) {
      const m = this.store.message(s.messageId);
      if (m?.state === 'done')
        return {
          step: s.step.name,
          kind: 'done',
          attempt: s.attempt,
          output: this.store.replies(s.messageId).join('\n\n'),
        };
      if (m === undefined || GIVEN_UP.has(m.state ?? ''))
        return {
          step: s.step.name,
          kind: 'failed',
          attempt: s.attempt,
          note: m?.error ?? `its row ended ${m?.state ?? 'missing'}`,
        };
    }
    if (s.status === 'asking' && s.approvalId !== null) {
      const row = toolApprovalsOf(this.opts.db).get(s.approvalId);
      if (!row)
        return { step: s.step.name, kind: 'rejected', attempt: s.attempt, note: 'its question is gone' };
      if (row.state === 'approved') {
        const output = `approved by ${row.decided_by ?? 'someone'}${row.note ? `: ${row.note}` : ''}`;
        return { step: s.step.name, kind: 'approved', attempt: s.attempt, output };
      }
      if (row.state !== 'pending') {
        const why =
          row.state === 'expired'
            ? 'nobody decided in time'
            : row.state === 'cancelled'
              ? `cancelled: ${row.note ?? ''}`
              : `rejected by ${row.decided_by ?? 'someone'}${row.note ? `: ${row.note}` : ''}`;
        return { step: s.step.name, kind: 'rejected', attempt: s.attempt, note: why };
      }
    }
    return undefined;
  }

  /** Writes one move (inside the run's transaction); what the caller must do after the commit. */
  private apply(run: WorkflowRunRow, m: Move): 'queued' | 'told' | ToolApproval | null {
    const now = this.now();
    const { store, opts } = this;
    if (m.kind === 'event') {
      store.addEvent({ run_id: run.id, at: now, ...m.event });
      const s = m.event;
      if (s.kind === 'failed') {
        const again = this.movesOf(run).some((x) => x.kind === 'start' && x.state.step.name === s.step);
        if (again) {
          store.tell(
            run,
            `Workflow ${run.name} #${run.id}: step ${s.step} failed (${s.note ?? 'no answer'}); trying it again.`,
          );
          return 'told';
        }
      }
      return null;
    }
    if (m.kind === 'end') {
      if (!store.setState(run.id, 'running', m.state, m.note, now)) return null;
      store.addEvent({ run_id: run.id, step: null, kind: 'ended', note: m.note, at: now });
      store.tell(run, endText(run, m.state, m.note));
      opts.log.info({ run: run.id, workflow: run.name, state: m.state }, 'workflow run ended');
      return 'told';
    }
    const attempt = m.state.attempt + 1;
    if (m.kind === 'ask') {
      const gate = m.state.step as GateStep;
      const row = store.askGate({
        run,
        step: gate.name,
        attempt,
        question: `Workflow ${run.name} #${run.id}, gate ${gate.name}: ${gate.question}`,
        approvers: gate.approvers,
        timeoutMs: gate.timeoutMs,
        now,
      });
      opts.log.info({ run: run.id, step: gate.name, code: row.code }, 'workflow gate asked');
      return row;
    }
    const step = m.state.step as StoredAgentStep;
    const states = stepStates(store.definition(run), store.events(run.id));
    store.startStep({
      runId: run.id,
      step: step.name,
      attempt,
      group: run.group_folder,
      topic: stepTopic(run.id, step.name),
      chatJid: run.chat_jid,
      thread: run.thread,
      content: stepPrompt(step, run.arguments, states),
      workflow: run.name,
      now,
    });
    opts.log.info({ run: run.id, step: step.name, attempt }, 'workflow step started');
    return 'queued';
  }
}

function endNote(s: StepState): string {
  return s.status === 'rejected'
    ? `gate ${s.step.name} ${s.note ?? 'rejected'}`
    : `step ${s.step.name} failed: ${s.note ?? 'no answer'}`;
}

/** What the chat is told when a run ends. */
function endText(run: WorkflowRunRow, state: WorkflowRunState, note: string): string {
  const head = `Workflow ${run.name} #${run.id}`;
  if (state === 'done') return `${head} ${note}.`;
  if (state === 'rejected') return `${head} ended: ${note}. (/workflow resume ${run.id} asks again)`;
  return `${head} ${state}: ${note}. (/workflow resume ${run.id} tries again)`;
}
