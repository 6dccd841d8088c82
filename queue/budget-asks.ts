import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Db } from '../store/db.js';
import { dayOf, DailyUsage, type CapUse } from '../store/limits.js';
import { BUDGET_TOOL, toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';
import type { Run } from './run.js';

/**
 * Costs checked while a run spends (docs/COSTS.md, "While a run spends"). After each usage report the
 * recorder tells the guard (spent); a run whose group or sender has reached a daily cost or token cap
 * (budget_grants added) is then paused at its next tool call or its next turn: a `tool_approvals` row
 * (tool `gated:budget`, ask id `budget:RUN:N`) asks the group's approvers in the run's chat, as a tool call
 * is asked about (docs/APPROVALS.md), and the run's hard timeout stands still. Approved: a budget_grants row
 * gives the cap once more its size for the day, and the run goes on. Rejected, or not decided in time: the
 * run stops cleanly: its tool calls are refused with a note the model reads, so it answers with what it
 * has, that answer carries the note, and nothing more is fed to it.
 */

/** What a pause point learns: go on, wait (the callback runs once it is decided), or stop. */
export type BudgetGate = { go: true } | { go: false; stopped: string | null };

interface RunBudget {
  /** The cap reached and not asked about yet. */
  over: CapUse | null;
  /** The cap asked about, with its row. */
  asking: { row: ToolApproval; cap: CapUse } | null;
  /** What to do once decided, by pause point (one each: a feed, an ask id). */
  resumes: Map<string, () => void>;
  /** Why the run stops (set once; a stopped run is never asked again). */
  stopped: string | null;
  /** The note for the next answer, once. */
  note: string | null;
  asked: number;
}

/** How the chat is asked (the broker's notifier). */
export interface BudgetNotifier {
  ask(row: ToolApproval): void;
}

export class BudgetGuard {
  /** The runs that went over (or near) a cap: most never do, and a caller asks no more of one not here. */
  readonly runs = new Map<Run, RunBudget>();
  private readonly store;
  private readonly usage;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly timeoutMs: number,
    private readonly now: () => number,
    private readonly notifier: () => BudgetNotifier | undefined,
  ) {
    this.store = toolApprovalsOf(db);
    this.usage = new DailyUsage(db);
  }

  /** A usage report of `run` was stored: notes a cap of its group or of `sender` that it reached. */
  spent(run: Run, sender: string | null, now: number): void {
    const s = this.stateOf(run);
    if (s.stopped !== null || s.over !== null || s.asking !== null) return;
    try {
      const hit = this.usage.capUses(run.key.group, sender, now).find((c) => c.used >= c.cap);
      if (hit) s.over = hit;
    } catch (err) {
      this.log.error({ runId: run.runId, err: coerceError(err).message }, 'reading the caps failed');
    }
  }

  /**
   * A pause point (a tool call about to be decided, a next turn about to be written): go on, or wait while
   * the approvers are asked (`resume` runs once they decided), or stop.
   */
  gate(run: Run, point: string, resume: () => void): BudgetGate {
    const s = this.runs.get(run);
    if (!s) return { go: true };
    if (s.stopped !== null) return { go: false, stopped: s.stopped };
    if (s.over === null && s.asking === null) return { go: true };
    s.resumes.set(point, resume);
    if (s.asking === null) this.ask(run, s);
    return { go: false, stopped: null };
  }

  /** The note for the run's next answer after it stopped, once; null otherwise. */
  takeNote(run: Run): string | null {
    const s = this.runs.get(run);
    if (!s || s.note === null) return null;
    const note = s.note;
    s.note = null;
    return note;
  }

  /** Whether the run was stopped over its budget. */
  stopped(run: Run): boolean {
    return (this.runs.get(run)?.stopped ?? null) !== null;
  }

  /** Looks at the rows asked about: a decided one goes on or stops its run (the broker's checker calls it). */
  check(): void {
    for (const [run, s] of this.runs) {
      if (s.asking === null) continue;
      const row = this.store.get(s.asking.row.id);
      if (!row || row.state === 'pending') continue;
      this.decided(run, s, row);
    }
  }

  /** Whether a budget question of the run waits for its decision (its idle run is kept open meanwhile). */
  asking(run: Run): boolean {
    return this.runs.get(run)?.asking != null;
  }

  /** The run ended: a question still open is cancelled (nobody waits for it), its state dropped. */
  runEnded(run: Run): void {
    const s = this.runs.get(run);
    this.runs.delete(run);
    if (!s?.asking) return;
    const t = this.now();
    try {
      this.store.tx(() => {
        this.store.cancel(s.asking!.row.id, 'the run ended before a decision', t);
        this.store.consume(s.asking!.row.id, t);
      });
    } catch (err) {
      this.log.error(
        { runId: run.runId, err: coerceError(err).message },
        'cancelling a budget question failed',
      );
    }
    run.release();
  }

  private stateOf(run: Run): RunBudget {
    let s = this.runs.get(run);
    if (!s) {
      s = { over: null, asking: null, resumes: new Map(), stopped: null, note: null, asked: 0 };
      this.runs.set(run, s);
    }
    return s;
  }

  private ask(run: Run, s: RunBudget): void {
    const cap = s.over!;
    s.over = null;
    const t = this.now();
    s.asked += 1;
    let row: ToolApproval;
    try {
      row = this.store.tx(() =>
        this.store.insert({
          group_folder: run.key.group,
          topic: run.key.topic,
          chat_jid: run.chatJid,
          run_id: run.runId,
          ask_id: `budget:${run.runId}:${s.asked}`,
          turn_rows: run.turns.openRowIds(),
          tool: BUDGET_TOOL,
          input_json: JSON.stringify({ kind: cap.kind, sender: cap.sender, cap: cap.cap, used: cap.used }),
          input_line: describeCap(run.key.group, cap),
          summary: null,
          approvers: 'owners',
          rule_id: null,
          created_at: t,
          expires_at: t + this.timeoutMs,
        }),
      );
    } catch (err) {
      // Nobody can be asked: the run stops rather than spend on without a word.
      this.log.error({ runId: run.runId, err: coerceError(err).message }, 'storing a budget question failed');
      this.stop(s, `${describeCap(run.key.group, cap)}, and gated could not ask for more`);
      return;
    }
    s.asking = { row, cap };
    run.hold();
    this.log.info({ runId: run.runId, code: row.code, kind: cap.kind, sender: cap.sender }, 'budget asked');
    try {
      this.notifier()?.ask(row);
    } catch (err) {
      this.log.error({ runId: run.runId, err: coerceError(err).message }, 'asking the chat failed');
    }
  }

  private decided(run: Run, s: RunBudget, row: ToolApproval): void {
    const { cap } = s.asking!;
    s.asking = null;
    const t = this.now();
    let used = false;
    try {
      used = this.store.tx(() => {
        if (!this.store.use(row.id, t)) return false;
        if (row.state === 'approved')
          grant(this.db, run.key.group, cap, this.baseCap(run.key.group, cap), row, t);
        return true;
      });
    } catch (err) {
      this.log.error({ runId: run.runId, err: coerceError(err).message }, 'granting a budget failed');
    }
    run.release();
    if (used && row.state === 'approved') {
      this.log.info({ runId: run.runId, code: row.code, by: row.decided_by }, 'budget granted');
    } else {
      const why =
        row.state === 'approved' || row.state === 'rejected'
          ? `${row.decided_by ?? 'an approver'} said stop${row.note ? ` (${row.note})` : ''}`
          : 'nobody granted more in time';
      this.stop(s, `${describeCap(run.key.group, cap)}; ${why}`);
      this.log.info({ runId: run.runId, code: row.code, state: row.state }, 'run stopped over its budget');
    }
    const resumes = [...s.resumes.values()];
    s.resumes.clear();
    for (const r of resumes) r();
  }

  private stop(s: RunBudget, why: string): void {
    s.stopped = why;
    s.note = `(gated stopped this run here: ${why}. This answer is what the agent had so far.)`;
  }

  /** The cap's own size (without grants): what one more budget adds. */
  private baseCap(group: string, cap: CapUse): number {
    const limits =
      cap.sender === '' ? this.usage.limitsOf(group) : this.usage.senderLimitsOf(group, cap.sender);
    const base = cap.kind === 'cost' ? limits?.costPerDayUsd : limits?.tokensPerDay;
    return base ?? cap.cap;
  }
}

function grant(db: Db, group: string, cap: CapUse, amount: number, row: ToolApproval, t: number): void {
  db.prepare(
    `INSERT INTO budget_grants (group_folder, sender, kind, day, amount, approval_id, granted_by, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(group, cap.sender, cap.kind, dayOf(t), amount, row.id, row.decided_by, t);
}

/** One line saying which cap is reached. */
export function describeCap(group: string, c: CapUse): string {
  const who = c.sender === '' ? group : `${c.sender} in ${group}`;
  const [used, cap] =
    c.kind === 'cost' ? [`$${c.used.toFixed(4)}`, `$${c.cap}`] : [`${c.used} tokens`, `${c.cap} tokens`];
  return `${who} reached the daily agent ${c.kind} cap (${used} of ${cap})`;
}
