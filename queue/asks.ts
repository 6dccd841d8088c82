import type { Logger } from '../core/log.js';
import { coerceError } from '../core/errors.js';
import { createWorker, type Worker } from '../core/worker.js';
import { DEFAULT_AUTONOMY } from '../router/autonomy.js';
import type { ShellParser } from '../router/shell.js';
import { renderToolInput, ToolRuleTable, type ToolVerdict } from '../router/tool-rules.js';
import type { Db } from '../store/db.js';
import { autonomyReader } from '../store/groups.js';
import { toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';
import type { ToolAsk } from './protocol/parser.js';
import type { Run } from './run.js';

/**
 * The tool question broker (docs/APPROVALS.md). An agent's `ask` block is decided by the group's tool
 * rules: `allow` and `deny` are answered at once with a permission line; `ask` stores a `tool_approvals`
 * row, has the chat asked (through the notifier the wiring gives), holds the run's hard timeout and waits.
 * Decisions are rows (a chat command, the dashboard or the CLI of another process writes them), so the
 * broker looks for them on a short timer and whenever it is woken; it then writes the permission line,
 * marks the decision used (once), releases the hold, and has the chat message say who decided.
 *
 * After a restart the waiting runs are gone but the rows are not: the re-run's agent asks the same
 * question again (same session, tool and input), which finds the unused row: a decided one answers at
 * once, a pending one is waited for, and the chat is not asked a second time.
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
  /** Splits shell commands for the rules (gated/shell-parser.ts). */
  shell: ShellParser;
  /** How often decisions made elsewhere and expiries are looked for. */
  checkMs: number;
  notifier?: ApprovalNotifier;
}

/** One question a live run waits on. */
interface Waiting {
  run: Run;
  askId: string;
}

/** The permission line (docs/PROTOCOL.md): no `turn`, not a turn. */
export function permissionLine(
  id: string,
  decision: 'allow' | 'deny',
  note?: string | null,
  by?: string | null,
): Record<string, unknown> {
  return {
    type: 'permission',
    id,
    decision,
    ...(note ? { note } : {}),
    ...(by ? { by } : {}),
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
  // Looks for decisions and expiries (core/worker.ts): every checkMs, and at once after a wake.
  private readonly checker: Worker;

  constructor(private readonly opts: AskBrokerOptions) {
    this.store = toolApprovalsOf(opts.db);
    this.autonomy = autonomyReader(opts.db);
    this.now = opts.now ?? Date.now;
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
  rules(): ToolRuleTable {
    const v = this.store.rulesVersion();
    if (!this.table || v !== this.tableVersion) {
      this.table = new ToolRuleTable(this.store.rules(), this.opts.shell);
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
    this.checker.start();
  }

  /** Stops looking; resolves once a look in flight has ended. */
  stop(): Promise<void> {
    return this.checker.stop();
  }

  /** Something may have been decided (a command, the dashboard, another process's commit). */
  wake(): void {
    this.checker.wake();
  }

  /** An `ask` block of a live run. */
  ask(run: Run, ask: ToolAsk): void {
    const t0 = this.now();
    const inputLine = renderToolInput(ask.tool, ask.input);
    const autonomy = this.autonomy(run.key.group)?.level ?? DEFAULT_AUTONOMY;
    const verdict = this.rules().decide(run.key.group, ask.tool, ask.input, autonomy);
    const log = {
      runId: run.runId,
      ask: ask.id,
      tool: ask.tool,
      rule: verdict.rule?.id ?? null,
      why: verdict.why,
    };
    if (verdict.decision !== 'ask') {
      const note = verdict.decision === 'deny' ? denyNote(verdict) : null;
      run.writeControl(permissionLine(ask.id, verdict.decision, note, 'rules'));
      this.opts.log.debug(
        { ...log, decision: verdict.decision, ms: this.now() - t0 },
        'tool decided by rule',
      );
      return;
    }
    const inputJson = JSON.stringify(ask.input ?? null);
    let row: ToolApproval;
    let fresh = false;
    try {
      row = this.store.tx(() => {
        const open = this.store.openQuestion(run.key.group, run.key.topic, ask.tool, inputJson);
        if (open) {
          this.store.reattach(open.id, run.runId, ask.id);
          return open;
        }
        fresh = true;
        return this.store.insert({
          group_folder: run.key.group,
          topic: run.key.topic,
          chat_jid: run.chatJid,
          run_id: run.runId,
          ask_id: ask.id,
          turn_rows: run.turns.openRowIds(),
          tool: ask.tool,
          input_json: inputJson,
          input_line: inputLine,
          summary: ask.summary,
          approvers: verdict.approvers,
          rule_id: verdict.rule?.id ?? null,
          created_at: t0,
          expires_at: t0 + this.opts.timeoutMs,
        });
      });
    } catch (err) {
      // Nothing stored: nobody can approve it, so the tool does not run.
      this.opts.log.error({ ...log, err: coerceError(err).message }, 'storing a tool approval failed');
      run.writeControl(permissionLine(ask.id, 'deny', 'gated could not store the approval', 'gated'));
      return;
    }
    this.opts.log.info({ ...log, code: row.code, fresh, state: row.state }, 'tool call asked');
    run.hold();
    this.waiting.set(row.id, { run, askId: ask.id });
    if (fresh) this.guard('asking the chat', () => this.opts.notifier?.ask(row));
    if (row.state !== 'pending') this.deliver(row);
  }

  /** A run ended: its questions stay stored for the re-run; nothing waits on it any more. */
  runEnded(run: Run): void {
    for (const [id, w] of this.waiting) if (w.run === run) this.waiting.delete(id);
  }

  /** The checker's step: expires, announces and delivers what is due. Never throws. */
  private check(): void {
    const t = this.now();
    this.guard('checking approvals', () => {
      // The checker wakes on every commit of another process: most looks find nothing to expire, and
      // must not take the write lock (and a commit) to learn it.
      if (this.store.overdue(t)) this.store.tx(() => this.store.expire(t));
      for (const id of [...this.waiting.keys()]) {
        const row = this.store.get(id);
        if (row && row.state !== 'pending') this.deliver(row);
      }
      for (const row of this.store.unannounced()) {
        this.opts.notifier?.decided(row);
        this.store.announce(row.id);
      }
    });
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
    const ok = w.run.writeControl(permissionLine(w.askId, decision, row.note, row.decided_by));
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

/** The note a denial by the rules carries: what decided, and for a shell tool which command. */
function denyNote(v: ToolVerdict): string {
  return `denied by ${v.why}${v.command !== null ? ` (command: ${v.command})` : ''}`;
}
