import { randomInt } from 'node:crypto';
import type { ToolRuleRow } from '../router/tool-rules.js';
import { CODE_ALPHABET } from './approvals.js';
import type { Db } from './db.js';

/**
 * Tool rules and tool approvals (docs/APPROVALS.md), one named statement per operation, prepared once.
 * Codes share the pairing codes' alphabet but have 5 characters (pairing codes 8), so `/approve CODE`
 * names one row of one table whatever the code; the insert still checks both tables.
 */

/** Characters in a tool approval code. */
export const TOOL_CODE_LENGTH = 5;

/** One `tool_approvals` row. */
export interface ToolApproval {
  id: number;
  code: string;
  group_folder: string;
  topic: string;
  chat_jid: string;
  run_id: number | null;
  ask_id: string | null;
  turn_rows: string | null;
  tool: string;
  input_json: string;
  input_line: string;
  summary: string | null;
  approvers: string;
  rule_id: number | null;
  state: 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled';
  note: string | null;
  decided_by: string | null;
  created_at: number;
  expires_at: number;
  decided_at: number | null;
  used_at: number | null;
  platform_id: string | null;
  outbound_id: number | null;
  announced: number;
}

/** A new question, as the queue stores it. */
export interface NewToolApproval {
  group_folder: string;
  topic: string;
  chat_jid: string;
  run_id: number;
  ask_id: string;
  turn_rows: readonly number[];
  tool: string;
  input_json: string;
  input_line: string;
  summary: string | null;
  approvers: string;
  rule_id: number | null;
  created_at: number;
  expires_at: number;
}

/** A workflow gate's question, as the workflow store asks it. */
export type NewGateApproval = Omit<NewToolApproval, 'run_id' | 'turn_rows' | 'summary' | 'rule_id'>;

/** Whether a row is a workflow gate's question rather than an agent's tool call. */
export function isGate(row: Pick<ToolApproval, 'run_id' | 'ask_id'>): boolean {
  return row.run_id === null && (row.ask_id ?? '').startsWith('workflow:');
}

/** The tool of a budget question (queue/budget-asks.ts): a run over a daily cap asks to go on. */
export const BUDGET_TOOL = 'gated:budget';

/** Whether a row is a budget question (ask id `budget:RUN:N`); no agent's ask ever takes one. */
export function isBudget(row: Pick<ToolApproval, 'ask_id'>): boolean {
  return (row.ask_id ?? '').startsWith('budget:');
}

/** A typed tool code in canonical form, or undefined when it is not one (wrong length or alphabet). */
export function normalizeToolCode(typed: string): string | undefined {
  const code = typed.replace(/[\s-]/g, '').toUpperCase();
  if (code.length !== TOOL_CODE_LENGTH) return undefined;
  for (const c of code) if (!CODE_ALPHABET.includes(c)) return undefined;
  return code;
}

/** The statements of `tool_rules` and `tool_approvals`. */
export class ToolApprovalStore {
  private readonly s;

  constructor(private readonly db: Db) {
    this.s = {
      rulesVersion: db.prepare(`SELECT value FROM router_state WHERE key = 'tool_rules_version'`).pluck(),
      rules: db.prepare('SELECT * FROM tool_rules ORDER BY group_folder, seq, id'),
      addRule: db.prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, input, decision, approvers)
         VALUES (@group_folder, @seq, @tool, @input, @decision, @approvers)`,
      ),
      removeRule: db.prepare('DELETE FROM tool_rules WHERE id = ?'),
      open: db.prepare(
        `SELECT * FROM tool_approvals WHERE group_folder = ? AND topic = ? AND tool = ? AND input_json = ?
           AND used_at IS NULL AND state NOT IN ('expired', 'cancelled') AND ask_id NOT LIKE 'budget:%'
         ORDER BY id LIMIT 50`,
      ),
      pairingCode: db.prepare('SELECT 1 FROM approvals WHERE code = ?').pluck(),
      insert: db.prepare(
        `INSERT INTO tool_approvals (code, group_folder, topic, chat_jid, run_id, ask_id, turn_rows, tool,
           input_json, input_line, summary, approvers, rule_id, created_at, expires_at)
         VALUES (@code, @group_folder, @topic, @chat_jid, @run_id, @ask_id, @turn_rows, @tool, @input_json,
           @input_line, @summary, @approvers, @rule_id, @created_at, @expires_at)
         ON CONFLICT(code) DO NOTHING RETURNING *`,
      ),
      reattach: db.prepare('UPDATE tool_approvals SET run_id = ?, ask_id = ? WHERE id = ?'),
      get: db.prepare('SELECT * FROM tool_approvals WHERE id = ?'),
      byCode: db.prepare('SELECT * FROM tool_approvals WHERE code = ?'),
      decide: db.prepare(
        `UPDATE tool_approvals SET state = @state, note = @note, decided_by = @by, decided_at = @now
         WHERE code = @code AND state = 'pending' RETURNING *`,
      ),
      cancel: db.prepare(
        `UPDATE tool_approvals SET state = 'cancelled', note = @note, decided_by = 'gated', decided_at = @now
         WHERE id = @id AND state = 'pending' RETURNING *`,
      ),
      consume: db.prepare('UPDATE tool_approvals SET used_at = ? WHERE id = ? AND used_at IS NULL'),
      overdue: db.prepare(`SELECT 1 FROM tool_approvals WHERE state = 'pending' AND expires_at <= ? LIMIT 1`),
      nextExpiry: db.prepare(`SELECT MIN(expires_at) FROM tool_approvals WHERE state = 'pending'`).pluck(),
      expire: db.prepare(
        `UPDATE tool_approvals SET state = 'expired', note = 'no decision', decided_by = 'expiry',
           decided_at = @now WHERE state = 'pending' AND expires_at <= @now RETURNING *`,
      ),
      use: db.prepare(
        `UPDATE tool_approvals SET used_at = ? WHERE id = ? AND used_at IS NULL AND state != 'pending'`,
      ),
      unannounced: db.prepare(
        `SELECT * FROM tool_approvals WHERE state != 'pending' AND announced = 0 ORDER BY id LIMIT 100`,
      ),
      announce: db.prepare('UPDATE tool_approvals SET announced = 1 WHERE id = ?'),
      unasked: db.prepare(
        `SELECT * FROM tool_approvals WHERE state = 'pending' AND platform_id IS NULL AND outbound_id IS NULL
         ORDER BY id LIMIT 100`,
      ),
      asked: db.prepare('UPDATE tool_approvals SET platform_id = ?, outbound_id = ? WHERE id = ?'),
      pending: db.prepare(`SELECT * FROM tool_approvals WHERE state = 'pending' ORDER BY id LIMIT ?`),
      recent: db.prepare(
        `SELECT * FROM tool_approvals WHERE state != 'pending' ORDER BY decided_at DESC, id DESC LIMIT ?`,
      ),
    };
  }

  /** The counter every change of tool_rules bumps (any process): the compiled table is rebuilt when it moves. */
  rulesVersion(): string {
    return String(this.s.rulesVersion.get() ?? '0');
  }

  /** Every tool rule in table order. */
  rules(): ToolRuleRow[] {
    return this.s.rules.all() as ToolRuleRow[];
  }

  /** Adds a rule row (the caller checked it); returns its id. */
  addRule(row: Omit<ToolRuleRow, 'id'>): number {
    return Number(
      this.s.addRule.run({ ...row, input: row.input ?? '*', approvers: row.approvers ?? 'owners' })
        .lastInsertRowid,
    );
  }

  /** Deletes a rule row; false when there was none. */
  removeRule(id: number): boolean {
    return this.s.removeRule.run(id).changes > 0;
  }

  /**
   * The unused questions of this session with this tool and input (pending or decided), oldest first: the
   * broker takes one only when it was asked by the same turn (its rows) and no other ask waits on it.
   */
  openQuestions(group: string, topic: string, tool: string, inputJson: string): ToolApproval[] {
    return this.s.open.all(group, topic, tool, inputJson) as ToolApproval[];
  }

  /** Stores a new pending question under a fresh code, unique across tool and pairing codes. */
  insert(
    row: Omit<NewToolApproval, 'run_id' | 'turn_rows'> & {
      run_id: number | null;
      turn_rows: readonly number[] | null;
    },
  ): ToolApproval {
    for (let attempt = 0; attempt < 20; attempt++) {
      const code = newToolCode();
      if (this.s.pairingCode.get(code)) continue;
      const turnRows = row.turn_rows === null ? null : JSON.stringify(row.turn_rows);
      const out = this.s.insert.get({ ...row, code, turn_rows: turnRows }) as ToolApproval | undefined;
      if (out) return out;
    }
    throw new Error('no free tool approval code after 20 tries');
  }

  /**
   * Stores a workflow gate's question (docs/WORKFLOWS.md) under a fresh code: no run and no turn waits on
   * it (run_id NULL, turn_rows NULL), so no agent's ask ever takes it; the workflow engine reads its state.
   */
  insertGate(row: NewGateApproval): ToolApproval {
    return this.insert({ ...row, run_id: null, turn_rows: null, summary: null, rule_id: null });
  }

  /** The run and ask id that wait for this row now (a re-run asked the same question). */
  reattach(id: number, runId: number, askId: string): void {
    this.s.reattach.run(runId, askId, id);
  }

  get(id: number): ToolApproval | undefined {
    return this.s.get.get(id) as ToolApproval | undefined;
  }

  byCode(code: string): ToolApproval | undefined {
    return this.s.byCode.get(code) as ToolApproval | undefined;
  }

  /** Decides a pending row; undefined when the code is unknown or already decided (the first decision wins). */
  decide(
    code: string,
    approve: boolean,
    by: string,
    note: string | null,
    now: number,
  ): ToolApproval | undefined {
    return this.s.decide.get({ code, state: approve ? 'approved' : 'rejected', by, note, now }) as
      ToolApproval | undefined;
  }

  /** Pending rows past their time become `expired` (deny, note "no decision"); returns them. */
  expire(now: number): ToolApproval[] {
    return this.s.expire.all({ now }) as ToolApproval[];
  }

  /**
   * A pending row whose turn was stopped, interrupted or ended becomes `cancelled` with `note` (why); it can
   * no longer be decided. Undefined when it was not pending (decided meanwhile: the first change wins).
   */
  cancel(id: number, note: string, now: number): ToolApproval | undefined {
    return this.s.cancel.get({ id, note, now }) as ToolApproval | undefined;
  }

  /**
   * Marks a row used whatever its state: its ask got its one answer (a cancellation's deny), so a decision
   * that lands on it later answers nobody. True for the one caller that did.
   */
  consume(id: number, now: number): boolean {
    return this.s.consume.run(now, id).changes === 1;
  }

  /** Whether a pending row is past its time: a read, so a look that finds none takes no write lock. */
  overdue(now: number): boolean {
    return this.s.overdue.get(now) !== undefined;
  }

  /** When the first pending row expires (epoch ms), or undefined when none is pending. */
  nextExpiry(): number | undefined {
    return (this.s.nextExpiry.get() as number | null) ?? undefined;
  }

  /** Marks a decided row used; true only for the one caller that did (a decision is used once). */
  use(id: number, now: number): boolean {
    return this.s.use.run(now, id).changes === 1;
  }

  /** Decided rows whose chat message does not yet say so. */
  unannounced(): ToolApproval[] {
    return this.s.unannounced.all() as ToolApproval[];
  }

  announce(id: number): void {
    this.s.announce.run(id);
  }

  /** Pending rows whose chat message was never sent (gated died between storing and sending). */
  unasked(): ToolApproval[] {
    return this.s.unasked.all() as ToolApproval[];
  }

  /** Records the chat message that asked: a platform message with buttons, or an outbound row. */
  asked(id: number, platformId: string | null, outboundId: number | null): void {
    this.s.asked.run(platformId, outboundId, id);
  }

  /** Pending rows, oldest first. */
  pending(limit = 200): ToolApproval[] {
    return this.s.pending.all(limit) as ToolApproval[];
  }

  /** Decided rows, newest first. */
  recent(limit = 50): ToolApproval[] {
    return this.s.recent.all(limit) as ToolApproval[];
  }

  /** Runs `fn` in one immediate transaction. */
  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }
}

/** A new code from the CSPRNG. */
function newToolCode(): string {
  let code = '';
  for (let i = 0; i < TOOL_CODE_LENGTH; i += 1) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

const stores = new WeakMap<Db, ToolApprovalStore>();

/** The ToolApprovalStore of a database, made on first use (its statements prepared once). */
export function toolApprovalsOf(db: Db): ToolApprovalStore {
  let store = stores.get(db);
  if (!store) stores.set(db, (store = new ToolApprovalStore(db)));
  return store;
}
