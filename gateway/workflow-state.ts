import { STEP_REF, type AgentStep, type Workflow, type WorkflowStep } from '../core/workflow-file.js';
import type { WorkflowEvent } from '../store/workflows.js';

/** `$STEP_<name>` (its name captured) or `$ARGUMENTS`, in one pattern. */
const REFS = /\$STEP_([a-z0-9][a-z0-9_-]*)|\$ARGUMENTS/g;

/**
 * Where each step of a workflow run stands, derived from the run's events alone (docs/WORKFLOWS.md): the
 * events are the truth, so whatever a crash cut short is found again by reading them. Pure.
 */

export type StepStatus = 'waiting' | 'running' | 'asking' | 'done' | 'failed' | 'rejected' | 'cancelled';

/** One step's standing. */
export interface StepState {
  step: WorkflowStep;
  status: StepStatus;
  /** The newest attempt started or asked (0: none yet). */
  attempt: number;
  /** The inbound row of the attempt running. */
  messageId: number | null;
  /** The gate's tool_approvals row while it asks. */
  approvalId: number | null;
  /** What the step gave: the agent's answer, or the gate's decision. */
  output: string | null;
  note: string | null;
  /** Failed attempts since the run started or was last resumed. */
  failures: number;
}

/** A step stored with the command file's text it runs, read when its run started. */
export type StoredAgentStep = AgentStep & { commandText?: string };

/** Every step's state after the run's events, in file order. */
export function stepStates(wf: Workflow, events: readonly WorkflowEvent[]): Map<string, StepState> {
  const states = new Map<string, StepState>();
  for (const step of wf.steps)
    states.set(step.name, {
      step,
      status: 'waiting',
      attempt: 0,
      messageId: null,
      approvalId: null,
      output: null,
      note: null,
      failures: 0,
    });
  for (const e of events) {
    if (e.kind === 'resumed') {
      for (const s of states.values())
        if (s.status === 'failed' || s.status === 'rejected' || s.status === 'cancelled') {
          s.status = 'waiting';
          s.failures = 0;
        }
      continue;
    }
    const s = e.step === null ? undefined : states.get(e.step);
    if (!s) continue;
    switch (e.kind) {
      case 'started':
        Object.assign(s, { status: 'running', attempt: e.attempt, messageId: e.message_id, note: null });
        break;
      case 'asked':
        Object.assign(s, { status: 'asking', attempt: e.attempt, approvalId: e.approval_id, note: null });
        break;
      case 'done':
      case 'approved':
        Object.assign(s, { status: 'done', output: e.output ?? '', note: e.note });
        break;
      case 'failed':
        Object.assign(s, { status: 'failed', note: e.note, failures: s.failures + 1 });
        break;
      case 'rejected':
      case 'cancelled':
        Object.assign(s, { status: e.kind, note: e.note });
        break;
    }
  }
  return states;
}

/** Whether a step no longer holds back the steps that need it: done, or failed with `on-failure: continue`. */
export function satisfied(s: StepState): boolean {
  if (s.status === 'done') return true;
  return s.status === 'failed' && s.step.kind === 'agent' && s.step.onFailure.kind === 'continue';
}

/** Whether a failed step gets another attempt (`on-failure: retry N` with retries left). */
export function retries(s: StepState): boolean {
  const p = s.step.kind === 'agent' ? s.step.onFailure : null;
  return s.status === 'failed' && p?.kind === 'retry' && s.failures <= p.times;
}

/** The output a dependent step sees of `s`: its answer, or a line saying it failed. */
function outputOf(s: StepState): string {
  if (s.status === 'failed') return `(step ${s.step.name} failed: ${s.note ?? 'no answer'})`;
  return s.output ?? '';
}

/**
 * The text a step's agent gets: its prompt (or its command file with `$ARGUMENTS` replaced), with
 * `$ARGUMENTS` the run's arguments and `$STEP_<name>` that step's output; the outputs of the agent steps it
 * needs (directly, or through a gate: an approved plan reaches the step after the gate) and does not name
 * are added after it, each under its step's name.
 */
export function stepPrompt(
  step: StoredAgentStep,
  args: string,
  states: ReadonlyMap<string, StepState>,
): string {
  // One pass over the operator's text: what is put in (the run's arguments, an agent's output) is never
  // read again for `$ARGUMENTS` or `$STEP_` (an output naming $ARGUMENTS stays as written).
  const fill = (text: string, runArgs: string) =>
    text.replace(REFS, (whole, name: string | undefined) => {
      if (name === undefined) return runArgs;
      const s = states.get(name);
      return s ? outputOf(s) : whole;
    });
  const base =
    step.prompt !== null
      ? fill(step.prompt, args.trim())
      : (step.commandText ?? '')
          .split('$ARGUMENTS')
          .join(step.arguments !== null ? fill(step.arguments, args.trim()).trim() : args.trim());
  const named = new Set(
    [...[step.prompt, step.arguments].flatMap((t) => [...(t ?? '').matchAll(STEP_REF)])].map((m) => m[1]!),
  );
  const extra = handed(step, states)
    .filter((s) => !named.has(s.step.name))
    .map((s) => `Output of step ${s.step.name}:\n${outputOf(s)}`);
  return [base, ...extra].join('\n\n');
}

/** The agent steps whose output a step is handed: those it needs, a gate standing for what the gate needs. */
function handed(step: WorkflowStep, states: ReadonlyMap<string, StepState>): StepState[] {
  const out = new Map<string, StepState>();
  const walk = (names: readonly string[]) => {
    for (const n of names) {
      const s = states.get(n);
      if (!s || out.has(n)) continue;
      if (s.step.kind === 'gate') walk(s.step.needs);
      else out.set(n, s);
    }
  };
  walk(step.needs);
  return [...out.values()];
}
