import type { Db } from './db.js';
import { checkChain, macOf, receiptText, sha256Hex, type BrokenLink, type StoredCall } from './receipts.js';

/**
 * The `tool_calls` rows (docs/SECURITY.md, "Receipts"), one named statement per operation, prepared once. A
 * row is opened when the agent asks (or reports a call it never asked about), decided by the rules or a
 * person, and sealed once the call ended: sealing gives it the next place in its run's chain and its
 * receipt, in one transaction, so two records of one run never share a place.
 */

/** Characters of a call's input kept in the row; the digest covers the whole input. */
export const MAX_STORED_INPUT = 4096;

/** One `tool_calls` row. */
export interface ToolCallRow extends Omit<StoredCall, 'seq' | 'prev'> {
  seq: number | null;
  prev: string | null;
}

/** A call as it is opened. */
export interface NewToolCall {
  run_id: number;
  turn: number | null;
  call_id: string;
  tool: string;
  /** The input as compact JSON, whole: the row keeps MAX_STORED_INPUT characters and the digest of all. */
  input_json: string;
  started_at: number;
}

/** How a call ended, as sealed. */
export interface CallEnd {
  ended_at: number;
  output_bytes: number | null;
  output_sha256: string | null;
  error: string | null;
}

/** The statements of `tool_calls`, signing under `key`. */
export class ToolCallStore {
  private readonly s;

  constructor(
    private readonly db: Db,
    private readonly key: Buffer,
  ) {
    this.s = {
      open: db.prepare(
        `INSERT INTO tool_calls (run_id, turn, call_id, tool, input, input_bytes, input_sha256, started_at)
         VALUES (@run_id, @turn, @call_id, @tool, @input, @input_bytes, @input_sha256, @started_at)
         RETURNING id`,
      ),
      decide: db.prepare(
        `UPDATE tool_calls SET decision = @decision, decided_by = @decided_by, approval_id = @approval_id,
           decided_at = @decided_at WHERE id = @id AND seq IS NULL`,
      ),
      unsealed: db.prepare(
        'SELECT * FROM tool_calls WHERE run_id = ? AND call_id = ? AND seq IS NULL ORDER BY id DESC LIMIT 1',
      ),
      openOfRun: db.prepare('SELECT * FROM tool_calls WHERE run_id = ? AND seq IS NULL ORDER BY id'),
      last: db.prepare(
        'SELECT seq, receipt FROM tool_calls WHERE run_id = ? AND seq IS NOT NULL ORDER BY seq DESC LIMIT 1',
      ),
      get: db.prepare('SELECT * FROM tool_calls WHERE id = ?'),
      seal: db.prepare(
        `UPDATE tool_calls SET ended_at = @ended_at, output_bytes = @output_bytes,
           output_sha256 = @output_sha256, error = @error, seq = @seq, prev = @prev, receipt = @receipt
         WHERE id = @id AND seq IS NULL`,
      ),
      ofRun: db.prepare('SELECT * FROM tool_calls WHERE run_id = ? ORDER BY id'),
      chain: db.prepare('SELECT * FROM tool_calls WHERE run_id = ? AND seq IS NOT NULL ORDER BY seq'),
      bySeq: db.prepare('SELECT * FROM tool_calls WHERE run_id = ? AND seq = ?'),
      runs: db
        .prepare('SELECT DISTINCT run_id FROM tool_calls WHERE seq IS NOT NULL ORDER BY run_id')
        .pluck(),
    };
  }

  /** Opens a call; returns its row id. */
  open(c: NewToolCall): number {
    const row = this.s.open.get({
      run_id: c.run_id,
      turn: c.turn,
      call_id: c.call_id,
      tool: c.tool,
      input: c.input_json.slice(0, MAX_STORED_INPUT),
      input_bytes: Buffer.byteLength(c.input_json),
      input_sha256: sha256Hex(c.input_json),
      started_at: c.started_at,
    }) as { id: number };
    return row.id;
  }

  /** Records what decided an open call. */
  decide(
    id: number,
    decision: 'allow' | 'deny' | 'agent',
    decidedBy: string,
    approvalId: number | null,
    at: number,
  ): void {
    this.s.decide.run({ id, decision, decided_by: decidedBy, approval_id: approvalId, decided_at: at });
  }

  /** The newest unsealed call of a run with the agent's id, if any. */
  unsealed(runId: number, callId: string): ToolCallRow | undefined {
    return this.s.unsealed.get(runId, callId) as ToolCallRow | undefined;
  }

  /** The run's calls not sealed yet, in the order they were asked. */
  openOfRun(runId: number): ToolCallRow[] {
    return this.s.openOfRun.all(runId) as ToolCallRow[];
  }

  /**
   * Seals a call: the next place in its run's chain, linked to the receipt before it, signed. Returns the
   * receipt as the agent is handed it, or null when the row was sealed already (or is gone).
   */
  seal(id: number, end: CallEnd): string | null {
    return this.db
      .transaction(() => {
        const row = this.s.get.get(id) as ToolCallRow | undefined;
        if (!row || row.seq !== null) return null;
        const last = this.s.last.get(row.run_id) as { seq: number; receipt: string } | undefined;
        const sealed = { ...row, ...end, seq: (last?.seq ?? 0) + 1, prev: last?.receipt ?? '' };
        const mac = macOf(this.key, sealed);
        this.s.seal.run({ id, ...end, seq: sealed.seq, prev: sealed.prev, receipt: mac });
        return receiptText(row.run_id, sealed.seq, mac);
      })
      .immediate();
  }

  /** A run's calls in the order they were asked. */
  ofRun(runId: number): ToolCallRow[] {
    return this.s.ofRun.all(runId) as ToolCallRow[];
  }

  /** The runs that have sealed calls, oldest first. */
  runs(): number[] {
    return this.s.runs.all() as number[];
  }

  /** The first broken link of a run's chain, or null when every sealed record verifies. */
  verify(runId: number): BrokenLink | null {
    return checkChain(this.key, this.s.chain.all(runId) as StoredCall[]);
  }

  /** The sealed record at place `seq` of run `runId`, if any. */
  at(runId: number, seq: number): ToolCallRow | undefined {
    return this.s.bySeq.get(runId, seq) as ToolCallRow | undefined;
  }
}
