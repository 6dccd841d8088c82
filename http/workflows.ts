import { Hono } from 'hono';
import { stepStates } from '../gateway/workflow-state.js';
import { ApprovalStore } from '../store/approvals.js';
import type { Db } from '../store/db.js';
import { isBudget, isGate, toolApprovalsOf } from '../store/tool-approvals.js';
import { WorkflowStore, type WorkflowRunRow } from '../store/workflows.js';

/** The most of a step's output a view carries (the whole answer is in its reply rows). */
const OUTPUT_CHARS = 4000;

function clip(s: string | null): string | null {
  return s !== null && s.length > OUTPUT_CHARS ? `${s.slice(0, OUTPUT_CHARS - 1)}…` : s;
}

/** One run as the list shows it, with how many of its steps are done. */
function runView(store: WorkflowStore, r: WorkflowRunRow) {
  const states = [...stepStates(store.definition(r), store.events(r.id)).values()];
  return {
    id: r.id,
    group_folder: r.group_folder,
    name: r.name,
    arguments: clip(r.arguments),
    chat_jid: r.chat_jid,
    started_by: r.started_by,
    state: r.state,
    note: r.note,
    created_at: r.created_at,
    ended_at: r.ended_at,
    steps: states.length,
    done: states.filter((s) => s.status === 'done').length,
    current: states.filter((s) => ['running', 'asking'].includes(s.status)).map((s) => s.step.name),
  };
}

/**
 * The dashboard's workflows (docs/WORKFLOWS.md), mounted at /api/workflows behind the read rule: `GET /` the
 * latest runs, `GET /:id` one run with each step's standing (a waiting gate with its code) and every event,
 * which the page asks for again every second or two while it follows the run.
 */
export function workflowsApi(db: Db): Hono {
  const store = new WorkflowStore(db);
  const asks = toolApprovalsOf(db);
  const app = new Hono();
  app.get('/', (c) => c.json({ runs: store.recent(100).map((r) => runView(store, r)) }));
  app.get('/:id', (c) => {
    const id = Number(c.req.param('id'));
    const run = Number.isSafeInteger(id) ? store.run(id) : undefined;
    if (!run) return c.json({ error: `no workflow run ${c.req.param('id')}` }, 404);
    const steps = [...stepStates(store.definition(run), store.events(run.id)).values()].map((s) => ({
      name: s.step.name,
      kind: s.step.kind,
      needs: s.step.needs,
      status: s.status,
      attempt: s.attempt,
      note: s.note,
      output: clip(s.output),
      message_id: s.messageId,
      code: s.status === 'asking' && s.approvalId !== null ? (asks.get(s.approvalId)?.code ?? null) : null,
    }));
    const events = store.events(run.id).map((e) => ({ ...e, output: clip(e.output) }));
    return c.json({ run: runView(store, run), steps, events });
  });
  return app;
}

/**
 * `GET /api/waiting`: one list of everything waiting on a person, oldest first: agents' tool calls asked
 * about, workflow gates, and strangers' pairing codes; each with its code, group, chat, what is asked and
 * until when.
 */
export function waitingApi(db: Db, now: () => number): Hono {
  const asks = toolApprovalsOf(db);
  const pairing = new ApprovalStore(db);
  const app = new Hono();
  app.get('/', (c) => {
    const t = now();
    const questions = asks.pending().map((a) => ({
      kind: isGate(a)
        ? ('workflow gate' as const)
        : isBudget(a)
          ? ('budget' as const)
          : ('tool call' as const),
      code: a.code,
      group_folder: a.group_folder,
      chat_jid: a.chat_jid,
      what: isGate(a) || isBudget(a) ? a.input_line : `${a.tool}: ${a.input_line}`,
      who_decides: a.approvers === 'members' ? 'members and owners' : 'owners',
      asked_at: a.created_at,
      expires_at: a.expires_at,
    }));
    const codes = pairing.open(t).map((p) => ({
      kind: 'pairing code' as const,
      code: p.code,
      group_folder: p.group_folder,
      chat_jid: p.chat_jid,
      what: `${p.sender_name ?? p.sender} asks to join`,
      who_decides: 'owners',
      asked_at: p.created_at,
      expires_at: p.expires_at,
    }));
    const items = [...questions, ...codes].sort((a, b) => a.asked_at - b.asked_at);
    return c.json({ items, now: t });
  });
  return app;
}
