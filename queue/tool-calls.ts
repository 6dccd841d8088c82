import type { Logger } from '../core/log.js';
import { coerceError } from '../core/errors.js';
import type { ToolCallStore } from '../store/tool-calls.js';
import type { ToolAsk, ToolReport } from './protocol/parser.js';
import type { Run } from './run.js';

/**
 * The record of a run's tool calls (docs/SECURITY.md, "Receipts"): the ask broker opens a call when the
 * agent asks and says what decided it; a call refused is sealed at once (it never runs), an allowed one when
 * the agent reports its end (`tool_result`, docs/PROTOCOL.md), and whatever is still open when the run ends
 * is sealed then with that as its error. Each sealed call's receipt goes back to the agent on a `receipt`
 * line, or on the refusal's permission line. Bookkeeping never stops a run: a failed write is logged.
 */

/** What the agent is told of a sealed call: a line that is not a turn (docs/PROTOCOL.md). */
export function receiptLine(id: string, receipt: string): Record<string, unknown> {
  return { type: 'receipt', id, receipt };
}

/** The record of tool calls, over the store that signs them. */
export class ToolCallLog {
  /**
   * Runs that opened a call: only this log opens a run's calls (a run is this process's), so a run not in
   * it has none to seal at its end and its end reads nothing (most runs ask about no tool).
   */
  private readonly opened = new WeakSet<Run>();

  constructor(
    private readonly store: ToolCallStore,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** An ask of a live run: its call opened, for the turn it is part of. Null when storing failed. */
  asked(run: Run, ask: ToolAsk): number | null {
    this.opened.add(run);
    return this.guard(run, () =>
      this.store.open({
        run_id: run.runId,
        turn: run.turns.current || null,
        call_id: ask.id,
        tool: ask.tool,
        input_json: JSON.stringify(ask.input ?? null),
        started_at: this.now(),
      }),
    );
  }

  /** The call was allowed (by `why`; `approvalId` when a person decided): it runs, its end comes later. */
  allowed(run: Run, callId: number | null, why: string, approvalId: number | null = null): void {
    if (callId === null) return;
    this.guard(run, () => this.store.decide(callId, 'allow', why, approvalId, this.now()));
  }

  /** The call was refused (by `why`, with `note`): it never runs, so it is sealed now. Returns its receipt. */
  refused(
    run: Run,
    callId: number | null,
    why: string,
    note: string | null,
    approvalId: number | null = null,
  ): string | null {
    if (callId === null) return null;
    return this.guard(run, () => {
      const t = this.now();
      this.store.decide(callId, 'deny', why, approvalId, t);
      return this.store.seal(callId, {
        ended_at: t,
        output_bytes: null,
        output_sha256: null,
        error: note ?? 'refused',
      });
    });
  }

  /**
   * The agent reported a call's end: the open call it asked about, else (a call never asked, e.g. one the
   * agent refused by itself) a call opened and sealed now as the agent's own. Writes the receipt line.
   */
  reported(run: Run, report: ToolReport): void {
    const receipt = this.guard(run, () => {
      const t = this.now();
      let id = this.store.unsealed(run.runId, report.id)?.id;
      if (id === undefined) {
        this.opened.add(run);
        id = this.store.open({
          run_id: run.runId,
          turn: run.turns.current || null,
          call_id: report.id,
          tool: report.tool ?? '(unnamed)',
          input_json: JSON.stringify(report.input ?? null),
          started_at: t,
        });
        this.store.decide(id, 'agent', 'agent', null, t);
      }
      return this.store.seal(id, {
        ended_at: t,
        output_bytes: report.bytes,
        output_sha256: report.sha256,
        error: report.error,
      });
    });
    if (receipt) run.writeControl(receiptLine(report.id, receipt));
  }

  /** The run ended: its calls without a reported end are sealed with that as their error. */
  runEnded(run: Run): void {
    if (!this.opened.has(run)) return;
    this.guard(run, () => {
      const t = this.now();
      for (const c of this.store.openOfRun(run.runId)) {
        const error =
          c.decision === null
            ? 'the run ended before a decision'
            : 'the run ended before the call reported its end';
        this.store.seal(c.id, { ended_at: t, output_bytes: null, output_sha256: null, error });
      }
    });
  }

  private guard<T>(run: Run, fn: () => T): T | null {
    try {
      return fn();
    } catch (err) {
      this.log.error({ runId: run.runId, err: coerceError(err).message }, 'recording a tool call failed');
      return null;
    }
  }
}
