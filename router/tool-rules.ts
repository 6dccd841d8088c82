import { folderChain } from '../core/types.js';
import { tryCompileGlob, type GlobTest } from './glob.js';

/**
 * Tool rules (docs/APPROVALS.md): which tool calls of a group's agent run without a question (`allow`),
 * wait for a human (`ask`) or are refused (`deny`). Pure: rows in, a compiled table out, no I/O. Rows are
 * validated like routes: an invalid row never matches and is reported (`gated tools check`).
 */

/** What a rule decides for a tool call. */
export type ToolDecision = 'allow' | 'ask' | 'deny';
/** Who may decide an `ask`: the group's owners (default) or its members too. Admins always may. */
export type Approvers = 'owners' | 'members';

export const TOOL_DECISIONS: readonly ToolDecision[] = ['allow', 'ask', 'deny'];
export const APPROVERS: readonly Approvers[] = ['owners', 'members'];

/** One row of `tool_rules` as stored (any program may write it, so every column is checked). */
export interface ToolRuleRow {
  id: number;
  group_folder: string;
  seq: number;
  tool: string;
  input: string | null;
  decision: string;
  approvers: string | null;
}

/** A row that can match. */
export interface ToolRule {
  row: ToolRuleRow;
  tool: GlobTest;
  input: GlobTest;
  decision: ToolDecision;
  approvers: Approvers;
}

/** A row that never matches, and why. */
export interface InvalidToolRule {
  row: ToolRuleRow;
  reason: string;
}

/** The outcome for one tool call: the rule that decided (null: the default did). */
export interface ToolVerdict {
  decision: ToolDecision;
  approvers: Approvers;
  rule: ToolRuleRow | null;
}

/** explain's verdict on one row, in the order rows were considered. */
export type ToolExplainLine =
  | { row: ToolRuleRow; verdict: 'matched' | 'shadowed' }
  | { row: ToolRuleRow; verdict: 'no-match'; field: 'tool' | 'input' }
  | { row: ToolRuleRow; verdict: 'invalid'; reason: string };

/** Why a row is unusable, or null; `gated tools add` refuses a row for the same reasons. */
export function checkToolRule(row: Omit<ToolRuleRow, 'id'>): string | null {
  const c = compileRow({ ...row, id: 0 });
  return 'reason' in c ? c.reason : null;
}

function compileRow(row: ToolRuleRow): ToolRule | InvalidToolRule {
  const bad = (reason: string): InvalidToolRule => ({ row, reason });
  if (typeof row.group_folder !== 'string' || row.group_folder === '') return bad('group_folder is empty');
  if (!Number.isSafeInteger(row.seq)) return bad(`seq is not an integer (${String(row.seq)})`);
  if (typeof row.tool !== 'string' || row.tool === '') return bad('tool is empty');
  const tool = tryCompileGlob(row.tool);
  if (typeof tool !== 'function') return bad(`tool: ${tool.error}`);
  const inputGlob = row.input ?? '*';
  if (typeof inputGlob !== 'string') return bad('input is not text');
  const input = tryCompileGlob(inputGlob === '' ? '*' : inputGlob, { slash: true });
  if (typeof input !== 'function') return bad(`input: ${input.error}`);
  if (!(TOOL_DECISIONS as readonly string[]).includes(row.decision)) {
    return bad(`decision '${String(row.decision)}' is not one of ${TOOL_DECISIONS.join(', ')}`);
  }
  const approvers = row.approvers ?? 'owners';
  if (!(APPROVERS as readonly string[]).includes(approvers)) {
    return bad(`approvers '${String(approvers)}' is not one of ${APPROVERS.join(', ')}`);
  }
  return { row, tool, input, decision: row.decision as ToolDecision, approvers: approvers as Approvers };
}

/** All tool rules compiled once per table version, filed by group in (seq, id) order. */
export class ToolRuleTable {
  private readonly byGroup = new Map<string, (ToolRule | InvalidToolRule)[]>();
  readonly invalid: readonly InvalidToolRule[];

  constructor(
    rows: readonly ToolRuleRow[],
    readonly fallback: ToolDecision,
  ) {
    const invalid: InvalidToolRule[] = [];
    const sorted = [...rows].sort((a, b) => Number(a.seq) - Number(b.seq) || a.id - b.id);
    for (const row of sorted) {
      const c = compileRow(row);
      if ('reason' in c) invalid.push(c);
      const key = typeof row.group_folder === 'string' ? row.group_folder : '';
      const list = this.byGroup.get(key) ?? [];
      list.push(c);
      this.byGroup.set(key, list);
    }
    this.invalid = invalid;
  }

  /** The first valid row of the group, then of its ancestors, that takes the call; else the default. */
  decide(folder: string, tool: string, inputLine: string): ToolVerdict {
    for (const f of folderChain(folder)) {
      for (const r of this.byGroup.get(f) ?? []) {
        if ('reason' in r) continue;
        if (r.tool(tool) && r.input(inputLine)) {
          return { decision: r.decision, approvers: r.approvers, rule: r.row };
        }
      }
    }
    return { decision: this.fallback, approvers: 'owners', rule: null };
  }

  /** Row by row, why each rule of the chain would or would not decide this call, then the verdict. */
  explain(
    folder: string,
    tool: string,
    inputLine: string,
  ): { lines: ToolExplainLine[]; verdict: ToolVerdict } {
    const lines: ToolExplainLine[] = [];
    let verdict: ToolVerdict | null = null;
    for (const f of folderChain(folder)) {
      for (const r of this.byGroup.get(f) ?? []) {
        if ('reason' in r) lines.push({ row: r.row, verdict: 'invalid', reason: r.reason });
        else if (!r.tool(tool)) lines.push({ row: r.row, verdict: 'no-match', field: 'tool' });
        else if (!r.input(inputLine)) lines.push({ row: r.row, verdict: 'no-match', field: 'input' });
        else {
          lines.push({ row: r.row, verdict: verdict ? 'shadowed' : 'matched' });
          verdict ??= { decision: r.decision, approvers: r.approvers, rule: r.row };
        }
      }
    }
    return { lines, verdict: verdict ?? { decision: this.fallback, approvers: 'owners', rule: null } };
  }
}

/** Tools whose input line is their shell command. */
const SHELL_TOOLS = new Set(['Bash', 'bash', 'shell', 'exec', 'local_shell']);
/** Tools whose input line is the file they touch (Claude Code's names, and a generic `write_file`…). */
const FILE_TOOLS = new Set(['Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'read_file', 'write_file']);
/** The input fields that name a file, in the order they are looked for. */
const PATH_FIELDS = ['file_path', 'notebook_path', 'path'];

/**
 * A tool's input as one line, what `tool_rules.input` matches: the command of a shell tool, the path of a
 * file tool, else the compact JSON. Newlines become spaces so a glob sees one line.
 */
export function renderToolInput(tool: string, input: unknown): string {
  const o = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
  let line: string | undefined;
  if (SHELL_TOOLS.has(tool) && typeof o.command === 'string') line = o.command;
  else if (Array.isArray(o.command) && SHELL_TOOLS.has(tool)) line = o.command.map(String).join(' ');
  else if (FILE_TOOLS.has(tool)) {
    const field = PATH_FIELDS.find((k) => typeof o[k] === 'string');
    if (field !== undefined) line = o[field] as string;
  }
  line ??= JSON.stringify(input ?? null);
  return line.replace(/\r?\n/g, ' ');
}
