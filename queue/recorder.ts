import { groupDirOf } from '../core/group-dir.js';
import { coerceError } from '../core/errors.js';
import type { Signals } from '../core/signals.js';
import type { ActionApplier, ActionsOutcome } from './actions/apply.js';
import { permissionLine, type AskBroker } from './asks.js';
import { withAttachments } from './attachments.js';
import { memoryAnswer, turnMemory, turnSenders } from './memory.js';
import { resolveFiles } from './files.js';
import { platformOf, type AgentMessage, type SenderRole } from './prompt.js';
import type { Run, RunEnd, RunHooks } from './run.js';
import { engineRetryDelayMs, settlementOf } from './settle.js';
import type { BatchRow, BlockCommit, QueueStore, Settlement } from '../store/queue.js';
import { writableNow } from '../store/group-commit.js';
import { sessionsOf } from '../store/sessions.js';
import { usageOf } from '../store/usage.js';
import { usageReport } from './usage.js';
import type { BlockUsage } from './protocol/parser.js';
import { warnCaps } from './budget.js';
import { principalId, principalOf } from '../store/principal.js';
import type { QueueOptions, RunResult } from './types.js';

/** What the recorder tells the scheduler: a run left its lane, or new ready rows may exist. */
export interface RecorderEvents {
  /** The run has ended and its rows are settled: its slot is free. */
  ended(run: Run): void;
  /**
   * Rows may be ready now (a delegation answered, a task placed): every lane is fed. With `run`, only that
   * run's lane may take a turn it could not before (its agent waits for follow-ups, or it ended and its
   * slot is free): the pump feeds that lane alone.
   */
  wake(run?: Run): void;
}

/** What the recorder is built from: the queue's options plus the parts the queue made once. */
export interface RecorderDeps {
  opts: QueueOptions;
  store: QueueStore;
  applier: ActionApplier;
  signals: Signals;
  maxFailures: number;
  events: RecorderEvents;
}

/**
 * The run recorder: what each event of a run does to rows, each in its own transaction through store/
 * (docs/QUEUE.md). A block commits with its actions; a session id is saved; the end of a run settles its
 * rows (done, back to ready with a backoff, parked, stopped). Every hook of a Run is here, so the scheduler
 * never touches a row a run answered, and a Run never touches the database.
 */
export function runRecorder(d: RecorderDeps): RunHooks {
  const { opts, store, applier, signals, events } = d;
  const { config, log } = opts;
  const now = opts.now ?? Date.now;
  const senderRole = senderRoleOf(opts);
  const engine = new EngineWatch(log);

  return {
    runtime: opts.runtime,
    log,
    idleTimeoutMs: config.idleTimeoutMs,
    runTimeoutMs: config.runTimeoutMs,
    ...(opts.interruptGraceMs !== undefined ? { interruptGraceMs: opts.interruptGraceMs } : {}),
    maxOutputBytes: config.maxOutputBytes,
    now,
    // Another process's write lock is waited for by a later try, never by sleeping on the event loop.
    writable: () => writableNow(opts.db),
    message: (run, row) => agentMessage(opts, senderRole, run.key.group, row),
    holdIdle: (run) => opts.asks?.budget.asking(run) ?? false,
    memory: (group, rows) => turnMemory(opts.db, log, opts.access, group, rows, config.memoryTurnBytes ?? 0),
    resolveFiles(run, paths) {
      if (paths.length === 0) return [];
      // Checked on disk before the block's transaction: a reply never commits without its files' verdicts.
      const resolved = resolveFiles(groupDirOf(config.groupsDir, run.key.group), paths);
      for (const f of resolved.filter((r) => r.refused))
        log.warn({ runId: run.runId, file: f.path, reason: f.refused }, 'agent file refused');
      return resolved;
    },
    onBlock(run, commit, actions, answering, rows) {
      const stored = recordBlock(d, now(), run, commit, actions, answering, rows);
      // Turns through commit.through are answered now: an ask of theirs still waiting (held) is moot.
      if (stored && commit.through > 0 && run.hard.held) opts.asks?.answered(run, commit.through);
      return stored;
    },
    onIgnoredActions(run, actions) {
      applier.ignorePartial({ runId: run.runId }, actions);
    },
    onPartial(run, turn, text) {
      signals.partial.fire({ runId: run.runId, key: run.key, chatJid: run.chatJid, turn, text });
    },
    onDraftsEnd(run, from, to) {
      signals.draftsEnd.fire({ runId: run.runId, chatJid: run.chatJid, from, to });
    },
    onSessionId(run, sessionId) {
      store.saveSession(run.key, sessionId, now(), run.runId);
    },
    ...askHooks(opts.asks),
    onToolResult(run, report, usage) {
      opts.calls?.reported(run, report);
      if (usage) recordSpent(d, run, usage, now());
    },
    onMemory(run, q) {
      run.writeControl(memoryAnswer(opts.db, log, opts.access, run.key.group, run.turns.currentRows(), q));
    },
    onIdle(run) {
      signals.working.fire({ chatJid: run.chatJid, on: false });
      events.wake(run);
    },
    onNumbered(run) {
      events.wake(run);
    },
    onEnd(run, end) {
      const t = now();
      engine.saw(end, t);
      settleRun(d, engine.retryMs(t, opts.random), run, end, t);
      opts.asks?.runEnded(run, end);
      opts.calls?.runEnded(run);
      events.ended(run);
      signals.working.fire({ chatJid: run.chatJid, on: false });
      run.markSettled();
      events.wake(run);
    },
  };
}

/**
 * The hooks through which the ask broker hears of a run's asks and interrupts (answered turns: onBlock);
 * without a broker every ask is allowed.
 */
function askHooks(asks: AskBroker | undefined): Pick<RunHooks, 'onAsk' | 'onInterrupt'> {
  if (!asks) return { onAsk: (run, ask) => void run.writeControl(permissionLine(ask.id, 'allow')) };
  return {
    onAsk: (run, ask) => asks.ask(run, ask),
    onInterrupt: (run) => asks.interrupted(run),
  };
}

/** Since when runs have been ending because the container engine could not be reached (null: it answers). */
class EngineWatch {
  private downSince: number | null = null;

  constructor(private readonly log: QueueOptions['log']) {}

  /** A run ended: the engine was unreachable, or it answered (the run's agent exited). */
  saw(end: RunEnd, t: number): void {
    if (end.unreachable !== null) {
      if (this.downSince === null)
        this.log.warn({ err: end.unreachable }, 'the engine is unreachable; runs wait for it');
      this.downSince ??= t;
    } else if (end.exit !== null && this.downSince !== null) {
      this.log.info({ downMs: t - this.downSince }, 'the engine answers again');
      this.downSince = null;
    }
  }

  /** How long rows wait before the next try while the engine is away (undefined: it answers). */
  retryMs(t: number, random?: () => number): number | undefined {
    return this.downSince === null ? undefined : engineRetryDelayMs(t - this.downSince, random);
  }
}

/**
 * A settle that failed (logged) is tried again after each of these delays in turn: the run's rows must not
 * stay `running` without a run until gated restarts. After the last, they wait for the next start's recovery.
 */
export const SETTLE_RETRY_MS: readonly number[] = [1000, 5000, 30_000];

/** Settles the rows of an ended run in one transaction; a failure is logged and tried again later. */
function settleRun(
  d: RecorderDeps,
  engineRetryMs: number | undefined,
  run: Run,
  end: RunEnd,
  t: number,
): void {
  const { opts } = d;
  let st: Settlement;
  try {
    // The one setting it reads, not a copy of the whole configuration (10 µs a run of gated's 59 keys).
    st = settlementOf(run, end, t, {
      runTimeoutMs: opts.config.runTimeoutMs,
      maxFailures: d.maxFailures,
      random: opts.random,
      ...(engineRetryMs !== undefined ? { engineRetryMs } : {}),
    });
  } catch (err) {
    const error = coerceError(err).message;
    run.trace.end('error', error, t);
    opts.log.error({ runId: run.runId, err: error }, 'settling a run failed');
    return;
  }
  settleRows(d, run, end, st, 0);
}

function settleRows(d: RecorderDeps, run: Run, end: RunEnd, st: Settlement, attempt: number): void {
  const { opts, store } = d;
  const t = st.endedAt;
  try {
    const settled = store.settle(st);
    run.trace.end(st.result, st.error, t);
    const fields = {
      runId: run.runId,
      key: run.keyId,
      result: st.result,
      error: st.error,
      turns: run.turns.written,
      answered: run.turns.answered,
      parked: settled.parked,
    };
    if (failedRun(st.result, end)) {
      // The reason: gated's verdict, and the agent's own last words on stderr when it left any.
      const said = lastLine(st.stderrTail);
      opts.log.warn({ ...fields, ...(said ? { stderr: said } : {}) }, `run failed: ${st.error}`);
    } else opts.log.info(fields, 'run ended');
    opts.metrics?.runFinished(
      st.result,
      (t - run.startedMs) / 1000,
      st.idleMs === null ? null : st.idleMs / 1000,
    );
    if (settled.replyId !== null) d.signals.outbound.fire(settled.replyId);
  } catch (err) {
    const error = coerceError(err).message;
    const retryMs = SETTLE_RETRY_MS[attempt];
    opts.log.error({ runId: run.runId, err: error, retryMs: retryMs ?? null }, 'settling a run failed');
    if (retryMs === undefined) return run.trace.end('error', error, t);
    setTimeout(() => {
      if (opts.db.open) settleRows(d, run, end, st, attempt + 1);
    }, retryMs).unref();
  }
}

/**
 * Stores one block of a run with its actions in one transaction; false when nothing was committed (the
 * turns stay open and the run's end decides their rows' fate).
 */
function recordBlock(
  d: RecorderDeps,
  now: number,
  run: Run,
  commit: BlockCommit,
  actions: unknown,
  answering: BatchRow,
  rows: readonly BatchRow[],
): boolean {
  const { store, applier, signals } = d;
  const sessions = sessionsOf(d.opts.db);
  const usages = usageOf(d.opts.db);
  // Priced before the transaction (a read); stored in it, with the block.
  const sender = senderOf(answering);
  const budget = d.opts.asks?.budget;
  const usage = commit.usage && usageReport(usages, run, commit.usage, sender, now, true);
  if (usage) {
    const { input_tokens, output_tokens, cost_usd } = usage;
    commit = { ...commit, usage: { input_tokens, output_tokens, cost_usd } };
  }
  // The first answer after a run stopped over its budget says so (queue/budget-asks.ts).
  const stopNote = commit.reply && budget?.runs.has(run) ? budget.takeNote(run) : null;
  if (stopNote !== null && commit.reply)
    commit = {
      ...commit,
      reply: { ...commit.reply, content: `${commit.reply.content}\n\n${stopNote}`.trim() },
    };
  const ctx = {
    runId: run.runId,
    group: run.key.group,
    topic: run.key.topic,
    chatJid: run.chatJid,
    answering,
    turnRows: rows.map((r) => r.id),
    turn: commit.through > 0 ? commit.through : run.turns.current,
    // Read only for a block with actions: whose memory a `remember` writes.
    ...(actions !== undefined ? { senders: turnSenders(d.opts.access, run.key.group, rows) } : {}),
    now,
  };
  // A delegated run answers no platform chat: its answer goes back to the delegating session.
  const reply = commit.reply;
  const delegated = reply !== null && applier.isDelegationChat(run.chatJid);
  let done: ActionsOutcome | undefined;
  let returned: number | null = null;
  let warned: number[] = [];
  let id: number | null;
  try {
    id = store.commitBlock(delegated ? { ...commit, reply: null } : commit, () => {
      // A file refused as the block arrived (§17): the session learns it in its next line, as it does
      // for a file refused at delivery (delivery/files.ts).
      for (const f of delegated ? [] : (reply?.files ?? []))
        if (f.refused !== null) sessions.note(run.key, `the file ${f.path} was not sent: ${f.refused}`);
      if (delegated && reply.content !== '') returned = applier.answerDelegation(ctx, reply.content);
      if (actions !== undefined) done = applier.apply(ctx, actions);
      if (usage) usages.record(usage, false);
      if (usage && !delegated) warned = warnCaps(d.opts.db, run, sender, now);
    });
  } catch (err) {
    d.opts.log.error({ runId: run.runId, err: coerceError(err).message }, 'storing a block failed');
    return false;
  }
  if (id !== null) signals.outbound.fire(id);
  for (const out of [...(done?.outbound ?? []), ...warned]) signals.outbound.fire(out);
  if (usage) budget?.spent(run, sender, now);
  if (returned !== null || (done?.placed ?? 0) > 0) d.events.wake();
  if ((done?.scheduled ?? 0) > 0) signals.tasks.fire();
  return true;
}

/**
 * A run that failed: not ok, not stopped by /stop, not put back at shutdown, and not one of the runs of an
 * engine outage (EngineWatch warns once for all of them).
 */
function failedRun(result: RunResult, end: RunEnd): boolean {
  return result !== 'ok' && result !== 'stopped' && end.killed !== 'shutdown' && end.unreachable === null;
}

/** The last non-empty line of an agent's stderr tail, at most 300 characters (null when there is none). */
function lastLine(tail: string | null): string | null {
  const line = (tail ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .at(-1);
  return line === undefined ? null : line.slice(0, 300);
}

/** Who sent a row in `group`, as the agent is told. */
export type SenderRoleOf = (group: string, row: BatchRow) => SenderRole;

/** The sender's role from the access rules the queue was given; without any, everyone is a member. */
export function senderRoleOf(opts: Pick<QueueOptions, 'access'>): SenderRoleOf {
  const access = opts.access;
  return access ? (group, row) => access.senderRole(group, row) : () => 'member';
}

/** A stored row as the agent of `group` receives it: its sender's role, its attachments' paths. */
export function agentMessage(
  opts: Pick<QueueOptions, 'db'>,
  senderRole: SenderRoleOf,
  group: string,
  r: BatchRow,
): AgentMessage {
  const m: AgentMessage = {
    id: r.id,
    chat_jid: r.chat_jid,
    platform: platformOf(r.chat_jid),
    sender: r.sender,
    sender_name: r.sender_name,
    content: r.content,
    verb: r.verb,
    timestamp: r.timestamp,
    platform_msg_id: r.platform_msg_id,
    sender_role: senderRole(group, r),
    ...(r.transcript === 1 ? { transcript: true } : {}),
  };
  // The batch statement read whether the row has files: most have none, and then nothing more is read.
  return r.files !== 0 ? withAttachments(opts.db, m) : m;
}

/**
 * Usage on a tool_result block: what the turn spent so far, on the run at once, for the sender of the turn
 * in progress; the 80 % warnings in the same transaction, then the budget's check (queue/budget-asks.ts).
 */
function recordSpent(d: RecorderDeps, run: Run, usage: BlockUsage, at: number): void {
  const { opts, applier, signals } = d;
  const sender = senderOf(run.turns.lastRowOf(run.turns.current));
  try {
    const usages = usageOf(opts.db);
    const warned = opts.db.transaction(() => {
      usages.record(usageReport(usages, run, usage, sender, at), true);
      return applier.isDelegationChat(run.chatJid) ? [] : warnCaps(opts.db, run, sender, at);
    })();
    for (const id of warned) signals.outbound.fire(id);
    opts.asks?.budget.spent(run, sender, at);
  } catch (err) {
    opts.log.error({ runId: run.runId, err: coerceError(err).message }, 'recording usage failed');
  }
}

/** Who a turn's usage is credited to: its row's sender as `platform:id` (the form members and limits use). */
function senderOf(row: BatchRow): string {
  return principalId(principalOf(row));
}
