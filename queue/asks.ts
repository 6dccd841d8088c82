import type { Logger } from '../core/log.js';
import { coerceError } from '../core/errors.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { Signals } from '../core/signals.js';
import { DEFAULT_AUTONOMY } from '../router/autonomy.js';
import type { LazyShellParser } from '../router/shell.js';
import { denyNote, renderToolInput, ToolRuleTable } from '../router/tool-rules.js';
import type { Db } from '../store/db.js';
import { autonomyReader } from '../store/groups.js';
import { toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';
import type { ToolAsk } from './protocol/parser.js';
import type { Run, RunEnd } from './run.js';
import type { ToolCallLog } from './tool-calls.js';
import { BudgetGuard } from './budget-asks.js';

/**
 * The tool question broker (docs/APPROVALS.md). An agent's `ask` block is decided by the group's tool
 * rules: `allow` and `deny` are answered at once with a permission line; `ask` stores a `tool_approvals`
 * row, has the chat asked (through the notifier the wiring gives), holds the run's hard timeout and waits.
 * Decisions are rows (a chat command, the dashboard or the CLI of another process writes them), so the
 * broker looks for them when `decided` fires (gated's own decision, or another process's commit the
 * watcher saw), else every `checkMs`; it then writes the permission line, marks the decision used (once),
 * releases the hold, and has the chat message say who decided.
 *
 * After a restart the waiting runs are gone but the rows are not: the re-run's agent asks the same
 * question again (same session, tool and input, and the same turn: the row's turn rows are all in the turn
 * that asks), which finds the unused row: a decided one answers at once, a pending one is waited for, and
 * the chat is not asked a second time. A decision answers one ask of one turn: each ask waits on a row of
 * its own (a second identical ask of the same run is a new question), and when its turn is stopped,
 * interrupted or ends any other way first, the ask is cancelled (the row `cancelled`, the agent told `deny`
 * if it still listens, the chat's message edited to say so), so no decision made later answers anybody.
 */

/** How the chat is asked and told (delivery/approvals.ts implements it; it never throws). */
export interface ApprovalNotifier {
  /** Asks the row's chat (message with the code and buttons where the platform has them). */
  ask(row: ToolApproval): void;
  /** Edits (or follows up) the message to say who decided, or that nobody did in time. */
  decided(row: ToolApproval): void;
}

/** What the broker needs; only gated/ constructs the real ones. */
export interface AskBrokerOptions {
  db: Db;
  log: Logger;
  now?: () => number;
  /** GATED_APPROVAL_TIMEOUT_MS. */
  timeoutMs: number;
  /** Splits shell commands for the rules (queue/shell-parser.ts), loaded in the background. */
  shell: LazyShellParser;
  /**
   * The timer fallback in ms (the poll interval): decisions another process made when no commit watcher
   * tells (`decided` does otherwise). Expiries need none: the checker runs again when the first falls due.
   */
  checkMs: number;
  notifier?: ApprovalNotifier;
  /** The checker looks at once when `decided` fires (core/signals.ts); else only every checkMs. */
  signals?: Pick<Signals, 'decided'>;
  /** The record of tool calls and their receipts (queue/tool-calls.ts); absent: none is kept. */
  calls?: ToolCallLog;
}

/** One question a live run waits on: exactly one per row, and one row per ask. */
interface Waiting {
  run: Run;
  askId: string;
  /** Its tool_calls row (null: not recorded). */
  callId: number | null;
  /** The newest turn written when it was asked: once the agent answered through it, the ask is moot. */
  through: number;
}

/** Why the asks still waiting when a run ended are cancelled, or null: kept for the re-run (a restart). */
export function cancelNoteOf(end: RunEnd): string | null {
  if (end.killed === 'shutdown' || (end.closedFor === 'shutdown' && end.killed === null)) return null;
  if (end.killed === 'stop') return 'the turn was stopped (/stop)';
  if (end.killed === 'timeout') return 'the run timed out';
  if (end.closedFor === 'reset') return 'the session was reset (/new)';
  return 'the run ended before a decision';
}

/** The permission line (docs/PROTOCOL.md): no `turn`, not a turn. */
export function permissionLine(
  id: string,
  decision: 'allow' | 'deny',
  note?: string | null,
  by?: string | null,
  receipt?: string | null,
): Record<string, unknown> {
  return {
    type: 'permission',
    id,
    decision,
    ...(note ? { note } : {}),
    ...(by ? { by } : {}),
    ...(receipt ? { receipt } : {}),
  };
}

/** Decides tool questions and delivers the decisions. */
export class AskBroker {
  private readonly store: ReturnType<typeof toolApprovalsOf>;
  /** The group's autonomy, read per ask (a change applies to the next call). */
  private readonly autonomy: ReturnType<typeof autonomyReader>;
  private readonly now: () => number;
  private readonly waiting = new Map<number, Waiting>();
  private table: ToolRuleTable | undefined;
  private tableVersion = '';
  // Looks for decisions and expiries (core/worker.ts): at once on `decided`, when the first pending
  // question expires, and every checkMs.
  private readonly checker: Worker;
  private unlisten: () => void = () => {};
  /** The daily caps while a run spends: its questions share this broker's rows, checker and notifier. */
  readonly budget: BudgetGuard;

  constructor(private readonly opts: AskBrokerOptions) {
    this.store = toolApprovalsOf(opts.db);
    this.autonomy = autonomyReader(opts.db);
    this.now = opts.now ?? Date.now;
    this.budget = new BudgetGuard(opts.db, opts.log, opts.timeoutMs, this.now, () => opts.notifier);
    this.checker = createWorker({
      name: 'tool approvals',
      log: opts.log,
      step: () => this.check(),
      intervalMs: opts.checkMs,
      keepAlive: false,
      now: this.now,
    });
  }

  /** The compiled rules, rebuilt when any process changed tool_rules (hot by the next ask). */
  rules(): ToolRuleTable | undefined {
    const shell = this.opts.shell.get();
    if (!shell) return undefined;
    const v = this.store.rulesVersion();
    if (!this.table || v !== this.tableVersion) {
      this.table = new ToolRuleTable(this.store.rules(), shell);
      this.tableVersion = v;
      for (const bad of this.table.invalid)
        this.opts.log.warn(
          { rule: bad.row.id, reason: bad.reason },
          'tool rule is invalid and never matches',
        );
    }
    return this.table;
  }

  /** Starts looking for decisions and expiries (a first look at once); asks chats that were never asked (a crash). */
  start(): void {
    this.guard('asking unasked approvals', () => {
      for (const row of this.store.unasked()) this.opts.notifier?.ask(row);
    });
    // Something may have been decided: a command, the dashboard, another process's commit.
    this.unlisten = this.opts.signals?.decided.on(() => this.checker.wake()) ?? (() => {});
    this.checker.start();
  }

  /** Stops looking; resolves once a look in flight has ended. */
  stop(): Promise<void> {
    this.unlisten();
    return this.checker.stop();
  }

  /** An `ask` block of a live run. */
  ask(run: Run, ask: ToolAsk): void {
    // An ask in the first moments of a start waits for the shell parser (asks keep their order).
    const rules = this.rules();
    if (!rules) return void this.opts.shell.warm().then(() => this.ask(run, ask));
    // A run over a daily cap waits here for its approvers first (queue/budget-asks.ts), or is refused.
    const gate = this.budget.gate(run, `ask:${ask.id}`, () => this.ask(run, ask));
    if (!gate.go) {
      if (gate.stopped !== null) this.overBudget(run, ask, gate.stopped);
      return;
    }
    const t0 = this.now();
    const calls = this.opts.calls;
    const callId = calls?.asked(run, ask) ?? null;
    const inputLine = renderToolInput(ask.tool, ask.input);
    const autonomy = this.autonomy(run.key.group)?.level ?? DEFAULT_AUTONOMY;
    const verdict = rules.decide(run.key.group, ask.tool, ask.input, autonomy);
    const log = {
      runId: run.runId,
      ask: ask.id,
      tool: ask.tool,
      rule: verdict.rule?.id ?? null,
      why: verdict.why,
    };
    if (verdict.decision !== 'ask') {
      const note = verdict.decision === 'deny' ? denyNote(verdict) : null;
      const why = verdict.why.slice(0, 300);
      if (note === null) calls?.allowed(run, callId, why);
      const receipt = note === null ? null : (calls?.refused(run, callId, why, note) ?? null);
      run.writeControl(permissionLine(ask.id, verdict.decision, note, 'rules', receipt));
      this.opts.log.debug(
        { ...log, decision: verdict.decision, ms: this.now() - t0 },
        'tool decided by rule',
      );
      return;
    }
    if (run.turns.open === 0) {
      // A decision answers an ask of one turn: with none open there is nobody to ask on behalf of.
      const note = 'no turn in progress to ask for';
      const receipt = calls?.refused(run, callId, 'gated', note) ?? null;
      run.writeControl(permissionLine(ask.id, 'deny', note, 'gated', receipt));
      this.opts.log.warn(log, 'tool call asked outside a turn: denied');
      return;
    }
    const stored = this.rowFor(run, ask, inputLine, verdict, t0);
    if (stored === undefined) {
      // Nothing stored: nobody can approve it, so the tool does not run.
      const note = 'gated could not store the approval';
      const receipt = calls?.refused(run, callId, 'gated', note) ?? null;
      run.writeControl(permissionLine(ask.id, 'deny', note, 'gated', receipt));
      return;
    }
    const { row, fresh } = stored;
    this.opts.log.info({ ...log, code: row.code, fresh, state: row.state }, 'tool call asked');
    run.hold();
    this.waiting.set(row.id, { run, askId: ask.id, callId, through: run.turns.written });
    if (fresh) this.guard('asking the chat', () => this.opts.notifier?.ask(row));
    if (row.state !== 'pending') this.deliver(row);
    // Its expiry may come before the one the checker waits for.
    else if (fresh) this.checker.wake();
  }

  /** Refuses a tool call of a run stopped over its budget: the model reads why, and answers with what it has. */
  private overBudget(run: Run, ask: ToolAsk, why: string): void {
    const note = `stopped: ${why}. Do not call more tools; answer now with what you have.`;
    const calls = this.opts.calls;
    const receipt = calls?.refused(run, calls.asked(run, ask), 'budget', note) ?? null;
    run.writeControl(permissionLine(ask.id, 'deny', note, 'gated', receipt));
  }

  /**
   * The ask's row: the unused one of the same turn that no ask waits on (a re-run after a restart asking
   * again), else a new pending one. Undefined when storing failed (logged).
   */
  private rowFor(
    run: Run,
    ask: ToolAsk,
    inputLine: string,
    verdict: ReturnType<ToolRuleTable['decide']>,
    t0: number,
  ): { row: ToolApproval; fresh: boolean } | undefined {
    const inputJson = JSON.stringify(ask.input ?? null);
    const turnRows = run.turns.openRowIds();
    try {
      return this.store.tx(() => {
        const open = this.store
          .openQuestions(run.key.group, run.key.topic, ask.tool, inputJson)
          .find((r) => !this.waiting.has(r.id) && sameTurn(r.turn_rows, turnRows));
        if (open) {
          this.store.reattach(open.id, run.runId, ask.id);
          return { row: open, fresh: false };
        }
        const row = this.store.insert({
          group_folder: run.key.group,
          topic: run.key.topic,
          chat_jid: run.chatJid,
          run_id: run.runId,
          ask_id: ask.id,
          turn_rows: turnRows,
          tool: ask.tool,
          input_json: inputJson,
          input_line: inputLine,
          summary: ask.summary,
          approvers: verdict.approvers,
          rule_id: verdict.rule?.id ?? null,
          created_at: t0,
          expires_at: t0 + this.opts.timeoutMs,
        });
        return { row, fresh: true };
      });
    } catch (err) {
      this.opts.log.error(
        { runId: run.runId, ask: ask.id, err: coerceError(err).message },
        'storing a tool approval failed',
      );
      return undefined;
    }
  }

  /**
   * The run's agent was told to stop its turn in progress (/interrupt, or a message of a group whose busy
   * mode is `interrupt`): each of its asks is cancelled and answered `deny`, so none waits for a decision
   * that would land on a turn nobody works on any more.
   */
  interrupted(run: Run): void {
    this.cancel(run, 'the turn was interrupted', () => true, true);
  }

  /** The run's agent answered turns 1..`through`: the asks of those turns are moot (cancelled, `deny`). */
  answered(run: Run, through: number): void {
    this.cancel(run, 'the turn ended before a decision', (w) => w.through <= through, true);
  }

  /**
   * A run ended: nothing waits on it any more. Its pending asks are cancelled (cancelNoteOf), unless gated
   * is shutting down: then they stay pending for the re-run of the same turn after the restart.
   */
  runEnded(run: Run, end: RunEnd): void {
    this.budget.runEnded(run);
    const note = cancelNoteOf(end);
    if (note !== null) return this.cancel(run, note, () => true, false);
    for (const [id, w] of this.waiting) if (w.run === run) this.waiting.delete(id);
  }

  /**
   * Cancels the asks of `run` that `pick` names: each row `cancelled` (a pending one) and used (so a
   * decision that lands on it later answers nobody), the agent told `deny` when `answer` (it still runs),
   * the hold released; the chat's messages say so at the checker's next step, woken now.
   */
  private cancel(run: Run, note: string, pick: (w: Waiting) => boolean, answer: boolean): void {
    const t = this.now();
    let n = 0;
    for (const [id, w] of this.waiting) {
      if (w.run !== run || !pick(w)) continue;
      this.waiting.delete(id);
      n += 1;
      this.guard('cancelling an ask', () =>
        this.store.tx(() => {
          this.store.cancel(id, note, t);
          this.store.consume(id, t);
        }),
      );
      const receipt = this.opts.calls?.refused(run, w.callId, 'gated', `cancelled: ${note}`, id) ?? null;
      if (!answer) continue;
      run.writeControl(permissionLine(w.askId, 'deny', `cancelled: ${note}`, 'gated', receipt));
      run.release();
    }
    if (n === 0) return;
    this.opts.log.info({ runId: run.runId, asks: n, why: note }, 'tool asks cancelled');
    this.checker.wake();
  }

  /** The checker's step: expires, announces and delivers what is due; returns the next expiry. Never throws. */
  private check(): number | undefined {
    const t = this.now();
    this.guard('checking approvals', () => {
      // The checker wakes on every commit of another process: most looks find nothing to expire, and
      // must not take the write lock (and a commit) to learn it.
      if (this.store.overdue(t)) this.store.tx(() => this.store.expire(t));
      for (const id of [...this.waiting.keys()]) {
        const row = this.store.get(id);
        if (row && row.state !== 'pending') this.deliver(row);
      }
      this.budget.check();
      for (const row of this.store.unannounced()) {
        this.opts.notifier?.decided(row);
        this.store.announce(row.id);
      }
    });
    let next: number | undefined;
    this.guard('reading the next expiry', () => (next = this.store.nextExpiry()));
    return next;
  }

  private deliver(row: ToolApproval): void {
    const w = this.waiting.get(row.id);
    if (!w) return;
    this.waiting.delete(row.id);
    // An agent that can no longer read leaves the decision unused, for the re-run that asks again.
    if (!w.run.acceptsControl) return;
    // The decision is used once: only the writer that marks it used answers the agent.
    if (!this.store.use(row.id, this.now())) return;
    const decision = row.state === 'approved' ? 'allow' : 'deny';
    const why = `approval ${row.code} (${row.state} by ${row.decided_by ?? '?'})`.slice(0, 300);
    let receipt: string | null = null;
    if (decision === 'allow') this.opts.calls?.allowed(w.run, w.callId, why, row.id);
    else receipt = this.opts.calls?.refused(w.run, w.callId, why, row.note ?? row.state, row.id) ?? null;
    const ok = w.run.writeControl(permissionLine(w.askId, decision, row.note, row.decided_by, receipt));
    w.run.release();
    this.opts.log.info(
      { runId: w.run.runId, code: row.code, decision, by: row.decided_by, written: ok },
      'tool decision delivered',
    );
  }

  private guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.opts.log.error({ err: coerceError(err).message }, `${what} failed`);
    }
  }
}

/** True when the stored turn rows (JSON) are all among `rows`: the same turn asks again (a re-run). */
function sameTurn(stored: string | null, rows: readonly number[]): boolean {
  let ids: unknown;
  try {
    ids = JSON.parse(stored ?? '[]');
  } catch {
    return false;
  }
  if (!Array.isArray(ids) || ids.length === 0) return false;
  const open = new Set(rows);
  return ids.every((id) => typeof id === 'number' && open.has(id));
}
