import { folderChain } from '../core/types.js';
import { tryCompileGlob, type GlobTest } from './glob.js';
import { presetDecide, type Autonomy } from './autonomy.js';
import { splitShell, type ShellParser } from './shell.js';
import { canonicalPattern, quoteWord } from './shell-words.js';

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
  /** Over the input line of a tool that is not a shell. */
  input: GlobTest;
  /** Over one simple command of a shell tool, in canonical form (router/shell-words.ts). */
  command: GlobTest;
  decision: ToolDecision;
  approvers: Approvers;
}

/** A row that never matches, and why. */
export interface InvalidToolRule {
  row: ToolRuleRow;
  reason: string;
}

/** The outcome for one tool call: the rule that decided (null: the group's autonomy preset did). */
export interface ToolVerdict {
  decision: ToolDecision;
  approvers: Approvers;
  rule: ToolRuleRow | null;
  /** For a shell tool, the simple command (canonical) whose verdict decided; null otherwise. */
  command: string | null;
  /** What decided, in words: `tool rule 4`, `autonomy supervised: …`, or why the command was not provable. */
  why: string;
}

/** explain's verdict on one row, in the order rows were considered. */
export type ToolExplainLine =
  | { row: ToolRuleRow; verdict: 'matched' | 'shadowed' }
  | { row: ToolRuleRow; verdict: 'no-match'; field: 'tool' | 'input' }
  | { row: ToolRuleRow; verdict: 'invalid'; reason: string };

/** explain's account of one input line: the whole input, or one simple command of a shell tool. */
export interface ToolExplainPart {
  /** The line the rules were matched against. */
  line: string;
  lines: ToolExplainLine[];
  verdict: ToolVerdict;
}

/** explain's account of a whole call. */
export interface ToolExplanation {
  parts: ToolExplainPart[];
  /** For a shell tool: what the parser could not prove simple (any of it makes the call an ask). */
  unproven: string[];
  verdict: ToolVerdict;
}

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
  const command = commandGlob(inputGlob === '' ? '*' : inputGlob);
  if (typeof command !== 'function') return bad(`input: ${command.error}`);
  if (!(TOOL_DECISIONS as readonly string[]).includes(row.decision)) {
    return bad(`decision '${String(row.decision)}' is not one of ${TOOL_DECISIONS.join(', ')}`);
  }
  const approvers = row.approvers ?? 'owners';
  if (!(APPROVERS as readonly string[]).includes(approvers)) {
    return bad(`approvers '${String(approvers)}' is not one of ${APPROVERS.join(', ')}`);
  }
  return {
    row,
    tool,
    input,
    command,
    decision: row.decision as ToolDecision,
    approvers: approvers as Approvers,
  };
}

/**
 * The input glob as a shell rule matches a simple command: in canonical form, and `prog *` also matching
 * `prog` alone (what anyone writing `allow 'ls *'` means).
 */
function commandGlob(glob: string): GlobTest | { error: string } {
  const canon = canonicalPattern(glob);
  const full = tryCompileGlob(canon, { slash: true });
  if (typeof full !== 'function' || !canon.endsWith(' *')) return full;
  const bare = tryCompileGlob(canon.slice(0, -2), { slash: true });
  return typeof bare === 'function' ? (v) => full(v) || bare(v) : full;
}

/** All tool rules compiled once per table version, filed by group in (seq, id) order. */
export class ToolRuleTable {
  private readonly byGroup = new Map<string, (ToolRule | InvalidToolRule)[]>();
  readonly invalid: readonly InvalidToolRule[];

  constructor(
    rows: readonly ToolRuleRow[],
    /** Splits shell commands (queue/shell-parser.ts loads it). */
    private readonly shell: ShellParser,
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

  /**
   * The verdict on one call: for a shell tool, every simple command of its command is decided by itself
   * (a deny of any wins, then anything unproven or asked makes it an ask); otherwise its input line is.
   * What no rule of the group's chain decides, the preset of the group's `autonomy` does.
   */
  decide(folder: string, tool: string, input: unknown, autonomy: Autonomy): ToolVerdict {
    return this.explain(folder, tool, input, autonomy).verdict;
  }

  /** Row by row and command by command, why each rule would or would not decide this call, then the verdict. */
  explain(folder: string, tool: string, input: unknown, autonomy: Autonomy): ToolExplanation {
    const command = shellCommand(tool, input);
    const part = (line: string, shell: boolean) => this.part(folder, tool, line, shell, autonomy);
    if (command === null) {
      const part0 = part(renderToolInput(tool, input), false);
      return { parts: [part0], unproven: [], verdict: part0.verdict };
    }
    const split = splitShell(this.shell, command);
    const parts = split.commands.map((c) => {
      const p = part(c.line, true);
      // Another form of the same command (no assignments, the program's bare name) denied: denied.
      for (const form of c.denyForms) {
        const alt = part(form, true);
        if (alt.verdict.decision === 'deny' && p.verdict.decision !== 'deny') {
          return { ...alt, verdict: { ...alt.verdict, command: c.line } };
        }
      }
      return p;
    });
    if (parts.length === 0 && split.unproven.length === 0) parts.push(part('', true));
    return { parts, unproven: split.unproven, verdict: combine(parts, split.unproven) };
  }
  /** The rules of the group's chain against one line, then the group's autonomy preset. */
  private part(
    folder: string,
    tool: string,
    line: string,
    shell: boolean,
    autonomy: Autonomy,
  ): ToolExplainPart {
    const lines: ToolExplainLine[] = [];
    let verdict: ToolVerdict | null = null;
    for (const f of folderChain(folder)) {
      for (const r of this.byGroup.get(f) ?? []) {
        if ('reason' in r) lines.push({ row: r.row, verdict: 'invalid', reason: r.reason });
        else if (!r.tool(tool)) lines.push({ row: r.row, verdict: 'no-match', field: 'tool' });
        else if (!(shell ? r.command : r.input)(line))
          lines.push({ row: r.row, verdict: 'no-match', field: 'input' });
        else {
          lines.push({ row: r.row, verdict: verdict ? 'shadowed' : 'matched' });
          verdict ??= {
            decision: r.decision,
            approvers: r.approvers,
            rule: r.row,
            command: shell ? line : null,
            why: `tool rule ${r.row.id}`,
          };
        }
      }
    }
    if (!verdict) {
      const preset = presetDecide(autonomy, tool, line, (t) => SHELL_TOOLS.has(t));
      verdict = { ...preset, approvers: 'owners', rule: null, command: shell ? line : null };
    }
    return { line, lines, verdict };
  }
}

/** The note a denial by the rules carries: what decided, and for a shell tool which command. */
export function denyNote(v: ToolVerdict): string {
  return `denied by ${v.why}${v.command !== null ? ` (command: ${v.command})` : ''}`;
}

/** A shell command's verdict from its parts': any deny, else unproven or any ask is an ask, else allow. */
function combine(parts: readonly ToolExplainPart[], unproven: readonly string[]): ToolVerdict {
  const denied = parts.find((p) => p.verdict.decision === 'deny');
  if (denied) return denied.verdict;
  const asks = parts.filter((p) => p.verdict.decision === 'ask');
  if (unproven.length > 0) {
    return {
      decision: 'ask',
      approvers: 'owners',
      rule: null,
      command: null,
      why: `not provably simple commands: ${unproven.join(', ')}`,
    };
  }
  if (asks.length > 0) {
    const approvers = asks.some((p) => p.verdict.approvers === 'owners') ? 'owners' : 'members';
    return { ...asks[0]!.verdict, approvers };
  }
  return parts[0]!.verdict;
}

/** Tools whose input line is their shell command. */
const SHELL_TOOLS = new Set(['Bash', 'bash', 'shell', 'exec', 'local_shell']);
/** Tools whose input line is the file they touch (Claude Code's names, and a generic `write_file`…). */
const FILE_TOOLS = new Set(['Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'read_file', 'write_file']);
/** The input fields that name a file, in the order they are looked for. */
const PATH_FIELDS = ['file_path', 'notebook_path', 'path'];

/** The command of a shell tool's input, or null for any other tool (or a shell input without one). */
export function shellCommand(tool: string, input: unknown): string | null {
  if (!SHELL_TOOLS.has(tool) || typeof input !== 'object' || input === null) return null;
  const c = (input as Record<string, unknown>).command;
  if (typeof c === 'string') return c;
  // Codex's exec tools give argv; joined, each word quoted so the parser sees the same words.
  if (Array.isArray(c)) return c.map((w) => quoteWord(String(w))).join(' ');
  return null;
}

/** The input a typed line stands for (`gated tools explain`): a command, a path, else JSON or the text. */
export function inputFromLine(tool: string, line: string): unknown {
  if (SHELL_TOOLS.has(tool)) return { command: line };
  if (FILE_TOOLS.has(tool)) return { file_path: line };
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return line;
  }
}

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
