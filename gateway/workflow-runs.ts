import { findCommand } from '../core/group-config.js';
import type { SessionKey } from '../core/types.js';
import { findWorkflow, listWorkflows, problemLines, type WorkflowFacts } from '../core/workflows.js';
import { AgentStore, BUILT_IN_AGENTS } from '../store/agents.js';
import type { Db } from '../store/db.js';
import { toolApprovalsOf } from '../store/tool-approvals.js';
import { stepTopic, WorkflowStore, type WorkflowRunRow } from '../store/workflows.js';
import { stepStates, type StoredAgentStep } from './workflow-state.js';

/**
 * Starting, cancelling and resuming workflow runs (docs/WORKFLOWS.md): what `/workflow run|cancel|resume`
 * write, inside the batch transaction. The engine (workflows.ts) does the rest on its next look.
 */

/** What a check of a workflow knows of agents: the built-in ones and the agent_profiles rows. */
export function workflowFacts(db: Db): WorkflowFacts {
  const agents = new AgentStore(db);
  return {
    agentKnown: (name) =>
      (BUILT_IN_AGENTS as readonly string[]).includes(name) || agents.profile(name) !== undefined,
  };
}

/** Who starts a run, where. */
export interface RunRequest {
  db: Db;
  configDir: string;
  group: string;
  name: string;
  args: string;
  chatJid: string;
  thread: string;
  sender: string;
  now: number;
}

/** Starts a run of a valid workflow file; the chat's answer (and the run, when it started). */
export function startRun(r: RunRequest): { text: string; run?: number } {
  const facts = workflowFacts(r.db);
  const found = findWorkflow(r.configDir, r.group, r.name, facts);
  if (!found) {
    const names = listWorkflows(r.configDir, r.group).map((f) => f.name);
    return {
      text: `no workflow '${r.name}' in ${r.group}${names.length ? ` (workflows: ${names.join(', ')})` : ''}`,
    };
  }
  if (found.problems.length > 0 || found.workflow === null) {
    const lines = problemLines(found);
    const more = lines.length > 5 ? `\n… and ${lines.length - 5} more (gated workflows check)` : '';
    return {
      text: `workflow ${r.name} is invalid and does not run:\n${lines.slice(0, 5).join('\n')}${more}`,
    };
  }
  const wf = found.workflow;
  // The command files' text as it is now: the run does what it was started as, whatever is edited later.
  const steps = wf.steps.map((s): typeof s => {
    if (s.kind !== 'agent' || s.command === null) return s;
    const cmd = findCommand(r.configDir, r.group, s.command, () => {});
    return { ...s, commandText: cmd?.text ?? '' } as StoredAgentStep;
  });
  const store = new WorkflowStore(r.db);
  const id = store.insertRun({
    group_folder: r.group,
    name: r.name,
    file: found.file,
    arguments: r.args,
    workflow: { ...wf, steps },
    chat_jid: r.chatJid,
    thread: r.thread,
    started_by: r.sender,
    now: r.now,
  });
  const order = wf.steps.map((s) => (s.kind === 'gate' ? `${s.name} (gate)` : s.name)).join(', ');
  return { text: `Workflow ${r.name} #${id} started: ${order}. /workflow status ${id} follows it.`, run: id };
}

/** Cancels a running run: its gates cancelled, its rows not yet taken stopped; the lanes still to stop. */
export function cancelRun(
  db: Db,
  run: WorkflowRunRow,
  by: string,
  now: number,
): { text: string; stop: SessionKey[] } {
  const store = new WorkflowStore(db);
  if (!store.setState(run.id, 'running', 'cancelled', `cancelled by ${by}`, now))
    return { text: `workflow run #${run.id} is not running (${run.state})`, stop: [] };
  const stop: SessionKey[] = [];
  const asks = toolApprovalsOf(db);
  for (const s of stepStates(store.definition(run), store.events(run.id)).values()) {
    if (s.status === 'running' && s.messageId !== null) {
      if (!store.stopRow(s.messageId, 'the workflow was cancelled'))
        stop.push({ group: run.group_folder, topic: stepTopic(run.id, s.step.name) });
    } else if (s.status === 'asking' && s.approvalId !== null) {
      asks.cancel(s.approvalId, `the workflow was cancelled by ${by}`, now);
      asks.consume(s.approvalId, now);
    } else continue;
    store.addEvent({
      run_id: run.id,
      step: s.step.name,
      kind: 'cancelled',
      attempt: s.attempt,
      note: `by ${by}`,
      at: now,
    });
  }
  store.addEvent({ run_id: run.id, step: null, kind: 'ended', note: `cancelled by ${by}`, at: now });
  return { text: `Workflow ${run.name} #${run.id} cancelled.`, stop };
}

/** Resumes a run that failed, was rejected or cancelled: its unfinished steps run (or ask) again. */
export function resumeRun(db: Db, run: WorkflowRunRow, by: string, now: number): string {
  const store = new WorkflowStore(db);
  if (run.state === 'running') return `Workflow ${run.name} #${run.id} is running already.`;
  if (run.state === 'done')
    return `Workflow ${run.name} #${run.id} finished; /workflow run ${run.name} starts a new run.`;
  if (!store.setState(run.id, run.state, 'running', null, now))
    return `workflow run #${run.id} changed meanwhile`;
  store.addEvent({ run_id: run.id, step: null, kind: 'resumed', note: `by ${by}`, at: now });
  return `Workflow ${run.name} #${run.id} resumed at its unfinished steps.`;
}

/** `/workflow status`: one run's steps, each with where it stands. */
export function statusText(db: Db, run: WorkflowRunRow): string {
  const store = new WorkflowStore(db);
  const lines = [`Workflow ${run.name} #${run.id}: ${run.state}${run.note ? ` (${run.note})` : ''}`];
  const asks = toolApprovalsOf(db);
  for (const s of stepStates(store.definition(run), store.events(run.id)).values()) {
    let extra = '';
    if (s.status === 'asking' && s.approvalId !== null) {
      const code = asks.get(s.approvalId)?.code;
      extra = code ? `: /approve ${code} or /reject ${code} NOTE` : '';
    } else if (s.note) extra = `: ${s.note}`;
    const attempt = s.attempt > 1 ? ` (attempt ${s.attempt})` : '';
    lines.push(`- ${s.step.name}: ${s.status}${attempt}${extra}`);
  }
  return lines.join('\n');
}
