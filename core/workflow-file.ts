import { parseDuration } from './duration.js';

/**
 * The workflow file format (docs/WORKFLOWS.md): `workflows/<name>.md` of a group's configuration folder.
 * Markdown that reads as what it does: lines before the first step describe the workflow (a
 * `description:` line, or its first paragraph); each `## <step>` heading starts a step, whose first lines
 * are `key: value` fields (needs, agent, model, command, arguments, approve, approvers, timeout,
 * on-failure) up to the first line that is not one, and whose remaining text is its prompt. Pure: no I/O.
 * Every problem names its line; a file with any problem never runs.
 */

/** What a failed step does to its run: `stop` it (the default), `continue` without it, or `retry` it. */
export type OnFailure = { kind: 'stop' } | { kind: 'continue' } | { kind: 'retry'; times: number };

/** A step that runs an agent: its prompt, or a command file of the group with `$ARGUMENTS`. */
export interface AgentStep {
  kind: 'agent';
  name: string;
  line: number;
  needs: string[];
  /** The prompt text (null when `command` names a command file instead). */
  prompt: string | null;
  /** `commands/<command>.md` of the group's configuration (null: the prompt). */
  command: string | null;
  /** What replaces `$ARGUMENTS` in the command file (null: the run's own arguments). */
  arguments: string | null;
  /** The agent profile and model of this step (null: the group's). */
  agent: string | null;
  model: string | null;
  onFailure: OnFailure;
}

/** A gate: the run waits here until an approver of the group approves (or rejects: the run ends). */
export interface GateStep {
  kind: 'gate';
  name: string;
  line: number;
  needs: string[];
  /** The question the chat is asked. */
  question: string;
  /** Who may decide: the group's owners (default) or its members too, as in tool rules. */
  approvers: 'owners' | 'members';
  /** How long the gate waits before it counts as rejected ("no decision"). */
  timeoutMs: number;
}

export type WorkflowStep = AgentStep | GateStep;

/** A parsed workflow (valid as far as the file alone can tell when `problems` is empty). */
export interface Workflow {
  name: string;
  description: string;
  steps: WorkflowStep[];
}

/** A problem of a workflow file: its 1-based line (0: the file as a whole) and why. */
export interface WorkflowProblem {
  line: number;
  reason: string;
}

/** A step or workflow name: lowercase letters, digits, `-` and `_` (it becomes part of a session topic). */
export const STEP_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/** A gate waits this long unless its `timeout:` says otherwise. */
export const DEFAULT_GATE_TIMEOUT_MS = 24 * 60 * 60 * 1000;
/** The most retries `on-failure: retry N` may ask for. */
export const MAX_RETRIES = 10;
/** `$STEP_<name>` in a prompt or arguments: that step's output. */
export const STEP_REF = /\$STEP_([a-z0-9][a-z0-9_-]*)/g;

const FIELDS = [
  'needs',
  'agent',
  'model',
  'command',
  'arguments',
  'approve',
  'approvers',
  'timeout',
  'on-failure',
] as const;
type Field = (typeof FIELDS)[number];

const FIELD_LINE = /^([a-z][a-z-]*):(?:\s+(.*))?$/;
const AGENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

interface RawStep {
  name: string;
  line: number;
  fields: Map<Field, { value: string; line: number }>;
  body: string[];
}

/** Parses one workflow file's text; the workflow and every problem found, each with its line. */
export function parseWorkflow(
  name: string,
  text: string,
): { workflow: Workflow; problems: WorkflowProblem[] } {
  const problems: WorkflowProblem[] = [];
  const lines = text.split(/\r?\n/);
  const intro: string[] = [];
  let description: string | undefined;
  const raws: RawStep[] = [];
  let cur: RawStep | undefined;
  let inFields = false;
  lines.forEach((text, i) => {
    const line = i + 1;
    const heading = /^##\s+(.*?)\s*$/.exec(text);
    if (heading) {
      const stepName = heading[1]!;
      if (!STEP_NAME.test(stepName))
        problems.push({
          line,
          reason: `step name '${stepName}' is not allowed (a-z0-9, - and _; 32 at most)`,
        });
      cur = { name: stepName, line, fields: new Map(), body: [] };
      raws.push(cur);
      inFields = true;
      return;
    }
    if (!cur) {
      const d = /^description:\s*(.*)$/.exec(text);
      if (d) description = d[1]!.trim();
      else if (!/^#\s/.test(text)) intro.push(text);
      return;
    }
    const field = inFields ? FIELD_LINE.exec(text) : null;
    if (field) {
      const key = field[1] as Field;
      if (!(FIELDS as readonly string[]).includes(key)) {
        problems.push({ line, reason: `unknown field '${key}' (known: ${FIELDS.join(', ')})` });
      } else if (cur.fields.has(key)) {
        problems.push({ line, reason: `'${key}' is given twice in step '${cur.name}'` });
      } else cur.fields.set(key, { value: (field[2] ?? '').trim(), line });
      return;
    }
    inFields = false;
    cur.body.push(text);
  });
  const steps = raws.map((r) => stepOf(r, problems)).filter((s): s is WorkflowStep => s !== null);
  if (raws.length === 0) problems.push({ line: 0, reason: 'has no steps (## <name> headings)' });
  checkGraph(steps, problems);
  const workflow = { name, description: description ?? firstParagraph(intro), steps };
  problems.sort((a, b) => a.line - b.line);
  return { workflow, problems };
}

function firstParagraph(lines: readonly string[]): string {
  const start = lines.findIndex((l) => l.trim() !== '');
  if (start < 0) return '';
  const end = lines.findIndex((l, i) => i > start && l.trim() === '');
  return lines
    .slice(start, end < 0 ? undefined : end)
    .map((l) => l.trim())
    .join(' ');
}

function stepOf(r: RawStep, problems: WorkflowProblem[]): WorkflowStep | null {
  const f = (k: Field) => r.fields.get(k);
  const bad = (line: number, reason: string) =>
    problems.push({ line, reason: `step '${r.name}': ${reason}` });
  const needs = needsOf(f('needs'), bad);
  const body = r.body.join('\n').trim();
  const approve = f('approve');
  if (approve) {
    for (const k of ['agent', 'model', 'command', 'arguments', 'on-failure'] as const) {
      const v = f(k);
      if (v) bad(v.line, `a gate (approve:) has no '${k}'`);
    }
    if (body !== '') bad(r.line, 'a gate (approve:) has no prompt text');
    if (approve.value === '') bad(approve.line, "'approve:' needs the question to ask");
    const approvers = f('approvers')?.value ?? 'owners';
    if (approvers !== 'owners' && approvers !== 'members')
      bad(f('approvers')!.line, `approvers must be 'owners' or 'members', not '${approvers}'`);
    let timeoutMs = DEFAULT_GATE_TIMEOUT_MS;
    const timeout = f('timeout');
    if (timeout) {
      try {
        timeoutMs = parseDuration(timeout.value);
      } catch (err) {
        bad(timeout.line, (err as Error).message);
      }
    }
    return {
      kind: 'gate',
      name: r.name,
      line: r.line,
      needs,
      question: approve.value,
      approvers: approvers === 'members' ? 'members' : 'owners',
      timeoutMs,
    };
  }
  for (const k of ['approvers', 'timeout'] as const) {
    const v = f(k);
    if (v) bad(v.line, `'${k}' is for gates (approve:) only`);
  }
  const command = f('command');
  if (command && body !== '') bad(command.line, 'has both a command file and prompt text: choose one');
  if (!command && body === '') bad(r.line, 'has no prompt text, command: or approve:');
  if (command && !STEP_NAME.test(command.value))
    bad(command.line, `command '${command.value}' is not a command name (commands/<name>.md)`);
  const args = f('arguments');
  if (args && !command) bad(args.line, "'arguments:' goes with 'command:'");
  for (const k of ['agent', 'model'] as const) {
    const v = f(k);
    if (v && !AGENT_NAME.test(v.value)) bad(v.line, `${k} '${v.value}' is not a name`);
  }
  return {
    kind: 'agent',
    name: r.name,
    line: r.line,
    needs,
    prompt: command ? null : body,
    command: command?.value ?? null,
    arguments: args?.value ?? null,
    agent: f('agent')?.value ?? null,
    model: f('model')?.value ?? null,
    onFailure: onFailureOf(f('on-failure'), bad),
  };
}

function needsOf(v: { value: string; line: number } | undefined, bad: (l: number, r: string) => void) {
  if (!v) return [];
  const names = v.value.split(/[\s,]+/).filter((n) => n !== '');
  if (names.length === 0) bad(v.line, "'needs:' names no step");
  if (new Set(names).size !== names.length) bad(v.line, "'needs:' names a step twice");
  return [...new Set(names)];
}

function onFailureOf(
  v: { value: string; line: number } | undefined,
  bad: (l: number, r: string) => void,
): OnFailure {
  if (!v || v.value === 'stop') return { kind: 'stop' };
  if (v.value === 'continue') return { kind: 'continue' };
  const m = /^retry\s+(\d+)$/.exec(v.value);
  if (m && Number(m[1]) >= 1 && Number(m[1]) <= MAX_RETRIES) return { kind: 'retry', times: Number(m[1]) };
  bad(
    v.line,
    `on-failure must be 'stop', 'continue' or 'retry N' (N from 1 to ${MAX_RETRIES}), not '${v.value}'`,
  );
  return { kind: 'stop' };
}

/** Duplicate names, unknown or own dependencies, cycles, and `$STEP_` references to steps not needed. */
function checkGraph(steps: readonly WorkflowStep[], problems: WorkflowProblem[]): void {
  const byName = new Map<string, WorkflowStep>();
  for (const s of steps) {
    if (byName.has(s.name)) problems.push({ line: s.line, reason: `step '${s.name}' is defined twice` });
    else byName.set(s.name, s);
  }
  for (const s of steps)
    for (const n of s.needs) {
      if (n === s.name) problems.push({ line: s.line, reason: `step '${s.name}' needs itself` });
      else if (!byName.has(n))
        problems.push({
          line: s.line,
          reason: `step '${s.name}' needs '${n}', which is no step of this file`,
        });
    }
  const cycle = findCycle(byName);
  if (cycle) {
    const first = byName.get(cycle[0]!)!;
    problems.push({
      line: first.line,
      reason: `the steps depend on each other in a cycle: ${cycle.join(' → ')}`,
    });
    return;
  }
  for (const s of steps) {
    if (s.kind !== 'agent') continue;
    const before = upstream(s, byName);
    for (const text of [s.prompt, s.arguments])
      for (const m of (text ?? '').matchAll(STEP_REF))
        if (!before.has(m[1]!))
          problems.push({
            line: s.line,
            reason: `step '${s.name}' uses $STEP_${m[1]}, which is not a step it needs (directly or through others)`,
          });
  }
}

/** A cycle of `needs`, as the names along it with the first repeated at the end; null when none. */
function findCycle(byName: ReadonlyMap<string, WorkflowStep>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (n: string): string[] | null => {
    if (state.get(n) === 'done') return null;
    if (state.get(n) === 'open') return [...path.slice(path.indexOf(n)), n];
    state.set(n, 'open');
    path.push(n);
    for (const d of byName.get(n)?.needs ?? []) {
      if (!byName.has(d) || d === n) continue;
      const c = visit(d);
      if (c) return c;
    }
    path.pop();
    state.set(n, 'done');
    return null;
  };
  for (const n of byName.keys()) {
    const c = visit(n);
    if (c) return c;
  }
  return null;
}

/** Every step `s` needs, directly or through others (the graph has no cycle). */
export function upstream(s: WorkflowStep, byName: ReadonlyMap<string, WorkflowStep>): Set<string> {
  const out = new Set<string>();
  const walk = (x: WorkflowStep) => {
    for (const d of x.needs) {
      if (out.has(d)) continue;
      out.add(d);
      const y = byName.get(d);
      if (y) walk(y);
    }
  };
  walk(s);
  return out;
}

/**
 * The steps in levels: each level's steps need only steps of earlier levels (so a level's steps may run
 * at once). Steps of a cycle or with unknown needs are left out (the file is invalid anyway).
 */
export function runOrder(wf: Workflow): WorkflowStep[][] {
  const placed = new Set<string>();
  const names = new Set(wf.steps.map((s) => s.name));
  const levels: WorkflowStep[][] = [];
  for (;;) {
    const level = wf.steps.filter(
      (s) => !placed.has(s.name) && s.needs.every((n) => placed.has(n) && names.has(n)),
    );
    if (level.length === 0) return levels;
    for (const s of level) placed.add(s.name);
    levels.push(level);
  }
}
