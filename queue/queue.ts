import { join } from 'node:path';
import { coerceError } from '../core/errors.js';
import { isValidFolder, sessionKeyId, type SessionKey } from '../core/types.js';
import { ActionApplier, type ActionsOutcome } from './actions/apply.js';
import { Lane, Lanes } from './lane.js';
import { formatPrompt, inputLine, type AgentMessage, type SenderRole } from './prompt.js';
import { Run, type RunHooks } from './run.js';
import { withAttachments } from './attachments.js';
import { resolveFiles } from './files.js';
import { parseMountList } from './runtime/mounts.js';
import type { RunSpec } from './runtime/types.js';
import { engineRetryDelayMs, settlementOf } from './settle.js';
import { QueueStore, type BatchRow, type Dispatched, type ReadyLane } from '../store/queue.js';
import { sessionsOf } from '../store/sessions.js';
import type { LaneFacts, LaneInfo, QueueOptions, WorkQueue } from './types.js';

export type {
  LaneFacts,
  LaneInfo,
  LaneState,
  PartialDraft,
  QueueMetrics,
  QueueOptions,
  RunResult,
  WorkQueue,
} from './types.js';

/** Who sent a row, as the agent is told, when no access rules are wired in: everyone is a member. */
export function defaultSenderRole(): SenderRole {
  return 'member';
}

/**
 * The coordinator of the session lanes under the global cap (docs/QUEUE.md). `pump` is the one place that
 * starts runs and feeds turns; it is cheap, synchronous and coalesced through wake(). The lanes (lane.ts)
 * hold who runs; the turns (turns.ts) hold what each run answered; every row change is a QueueStore
 * transaction.
 *
 * Invariants: at most one run per session key and at most maxConcurrent runs (Lanes refuses more); a row is
 * in one turn of one live run at a time (joining a turn is conditional on state = 'ready'); a turn's rows
 * become 'done' only in the transaction that stores the block answering it (QueueStore.commitBlock).
 */
export function createQueue(opts: QueueOptions): WorkQueue {
  const { config, log } = opts;
  const now = opts.now ?? Date.now;
  const store = new QueueStore(opts.db, config.maxInputBytes);
  const maxFailures = opts.maxFailures ?? 3;
  const lanes = new Lanes(config.maxConcurrent);
  const senderRole = opts.senderRole ?? defaultSenderRole;
  const applier = new ActionApplier({
    db: opts.db,
    log: log.child({ part: 'actions' }),
    tz: opts.actions?.tz ?? 'UTC',
    maxDepth: opts.actions?.maxDepth ?? 4,
    ...(opts.actions?.metrics ? { metrics: opts.actions.metrics } : {}),
  });
  const capabilities = opts.capabilities ?? ((key: SessionKey) => applier.capabilities(key.group));
  let scheduled = false;
  let closing: Promise<void> | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let retryAt: number | null = null;
  // Since when runs have been ending because the container engine could not be reached (null: it answers).
  let engineDownSince: number | null = null;

  const notify = (outboundId: number) => {
    try {
      opts.onOutbound?.(outboundId);
    } catch (err) {
      log.error({ err: coerceError(err).message }, 'onOutbound hook failed');
    }
  };

  const message = (group: string, r: BatchRow): AgentMessage =>
    withAttachments(opts.db, {
      id: r.id,
      sender: r.sender,
      sender_name: r.sender_name,
      content: r.content,
      verb: r.verb,
      timestamp: r.timestamp,
      platform_msg_id: r.platform_msg_id,
      sender_role: senderRole(group, r),
    });

  const working = (chatJid: string, on: boolean) => {
    try {
      opts.onWorking?.(chatJid, on);
    } catch (err) {
      log.error({ err: coerceError(err).message }, 'onWorking hook failed');
    }
  };

  const hooks: RunHooks = {
    runtime: opts.runtime,
    log,
    idleTimeoutMs: config.idleTimeoutMs,
    runTimeoutMs: config.runTimeoutMs,
    maxOutputBytes: config.maxOutputBytes,
    now,
    message: (run, row) => message(run.key.group, row),
    resolveFiles(run, paths) {
      // Checked on disk before the block's transaction: a reply never commits without its files' verdicts.
      const resolved = resolveFiles(join(config.groupsDir, run.key.group), paths);
      for (const f of resolved.filter((r) => r.refused))
        log.warn({ runId: run.runId, file: f.path, reason: f.refused }, 'agent file refused');
      return resolved;
    },
    onBlock(run, commit, actions, answering) {
      const t = now();
      const ctx = {
        runId: run.runId,
        group: run.key.group,
        topic: run.key.topic,
        chatJid: run.chatJid,
        answering,
        now: t,
      };
      // A delegated run answers no platform chat: its answer goes back to the delegating session.
      const reply = commit.reply;
      const delegated = reply !== null && applier.isDelegationChat(run.chatJid);
      let done: ActionsOutcome | undefined;
      let returned: number | null = null;
      let id: number | null;
      try {
        id = store.commitBlock(delegated ? { ...commit, reply: null } : commit, () => {
          if (delegated && reply.content !== '') returned = applier.answerDelegation(ctx, reply.content);
          if (actions !== undefined) done = applier.apply(ctx, actions);
        });
      } catch (err) {
        // Nothing was committed: the turns stay open and the run's end decides their rows' fate.
        log.error({ runId: run.runId, err: coerceError(err).message }, 'storing a block failed');
        return false;
      }
      if (id !== null) notify(id);
      for (const out of done?.outbound ?? []) notify(out);
      if (returned !== null || (done?.placed ?? 0) > 0) wake();
      return true;
    },
    onIgnoredActions(run, actions) {
      applier.ignorePartial({ runId: run.runId }, actions);
    },
    onPartial(run, turn, text) {
      try {
        opts.onPartial?.({ runId: run.runId, key: run.key, chatJid: run.chatJid, turn, text });
      } catch (err) {
        log.error({ runId: run.runId, err: coerceError(err).message }, 'onPartial hook failed');
      }
    },
    onSessionId(run, sessionId) {
      store.saveSession(run.key, sessionId, now());
    },
    onIdle(run) {
      working(run.chatJid, false);
      wake();
    },
    onEnd(run, end) {
      const t = now();
      if (end.unreachable !== null) {
        if (engineDownSince === null)
          log.warn({ err: end.unreachable }, 'the engine is unreachable; runs wait for it');
        engineDownSince ??= t;
      } else if (end.exit !== null && engineDownSince !== null) {
        log.info({ downMs: t - engineDownSince }, 'the engine answers again');
        engineDownSince = null;
      }
      try {
        const st = settlementOf(run, end, t, {
          ...config,
          maxFailures,
          random: opts.random,
          ...(engineDownSince !== null
            ? { engineRetryMs: engineRetryDelayMs(t - engineDownSince, opts.random) }
            : {}),
        });
        const settled = store.settle(st);
        log.info(
          {
            runId: run.runId,
            key: run.keyId,
            result: st.result,
            error: st.error,
            turns: run.turns.written,
            answered: run.turns.answered,
            parked: settled.parked,
          },
          'run ended',
        );
        opts.metrics?.runFinished(st.result, (t - run.startedMs) / 1000);
        if (settled.replyId !== null) notify(settled.replyId);
      } catch (err) {
        log.error({ runId: run.runId, err: coerceError(err).message }, 'settling a run failed');
      }
      lanes.end(run);
      working(run.chatJid, false);
      run.markSettled();
      wake();
    },
  };

  const specOf = (key: SessionKey, runId: number): RunSpec => {
    if (!isValidFolder(key.group)) throw new Error(`'${key.group}' is not a valid group folder`);
    const g = store.group(key.group);
    return {
      runId,
      group: key.group,
      topic: key.topic,
      groupDir: join(config.groupsDir, key.group),
      image: g?.image ?? null,
      network: g?.network === 1,
      mounts: parseMountList(g?.mounts),
    };
  };

  const dispatch = (ready: ReadyLane, t: number) => {
    const key: SessionKey = { group: ready.group, topic: ready.topic };
    const d = store.dispatch(key, t);
    if (!d) return;
    for (const f of d.failed) {
      log.error({ msgId: f.id, key: sessionKeyId(key), err: f.error }, 'message failed; the lane goes on');
      opts.metrics?.rowFailed?.('queue');
    }
    if (d.rows.length === 0) {
      wake();
      return;
    }
    const run = new Run(key, d.runId, d.chatJid, d.rows, hooks, t);
    run.noteIds = d.systemNoteIds;
    lanes.open(new Lane(key, run));
    let input: string;
    try {
      input = firstInput(key, d);
    } catch (err) {
      // The run is open and its rows are running: it must end through the usual path (rows back to ready
      // with a backoff, parked after repeated failures) instead of staying open with no process.
      const e = coerceError(err);
      void run.begin(() => {
        throw e;
      }, '');
      return;
    }
    log.info({ runId: d.runId, key: run.keyId, chat: d.chatJid, messages: d.rows.length }, 'run starting');
    working(d.chatJid, true);
    void run.begin(() => specOf(key, d.runId), input);
  };

  const firstInput = (key: SessionKey, d: Dispatched): string => {
    const messages = d.rows.map((r) => message(key.group, r));
    const forkFrom = d.sessionId === null ? sessionsOf(opts.db).forkSource(key) : undefined;
    return inputLine({
      turn: 1,
      prompt: formatPrompt(messages, d.systemNotes),
      sessionId: d.sessionId,
      ...(forkFrom !== undefined ? { forkFrom } : {}),
      group: key.group,
      topic: key.topic,
      chatJid: d.chatJid,
      messages,
      capabilities: capabilities(key),
      ...(opts.secrets ? { secrets: opts.secrets } : {}),
    });
  };

  const armRetryTimer = (t: number) => {
    const next = store.nextRetry(t);
    if (next === retryAt) return;
    clearTimeout(retryTimer);
    retryAt = next;
    if (next === null) return;
    retryTimer = setTimeout(() => {
      retryAt = null;
      wake();
    }, next - t);
    retryTimer.unref?.();
  };

  // The exact count of waiting lanes is a scan of the backlog: metrics get it at most once a second.
  let lanesReportedAt = -Infinity;
  const reportLanes = (t: number) => {
    if (!opts.metrics || t - lanesReportedAt < 1000) return;
    lanesReportedAt = t;
    const waiting = store.summaries(t).filter((l) => !lanes.has(l.keyId)).length;
    opts.metrics.lanes(lanes.size, waiting);
  };

  const pump = () => {
    scheduled = false;
    if (closing) return;
    const t = now();
    try {
      store.rejoinParked(maxFailures);
      for (const lane of lanes.all()) if (lane.feed(store, t)) working(lane.run.chatJid, true);
      // Only as many lanes as can start, plus up to the cap more to learn how many idle agents should
      // yield their slots (more waiting lanes than the cap cannot free more slots); fairly across groups.
      const next = store.nextLanes(t, lanes.keys(), lanes.free + lanes.cap, lanes.groups());
      let i = 0;
      while (lanes.free > 0 && i < next.length) dispatch(next[i++]!, t);
      if (next.length > i) {
        for (const run of lanes.yieldIdle(next.length - i)) {
          log.debug({ runId: run.runId, key: run.keyId }, 'idle agent yields its slot');
        }
      }
      reportLanes(t);
      armRetryTimer(t);
    } catch (err) {
      log.error({ err: coerceError(err).message }, 'queue pump failed');
    }
  };

  function wake(): void {
    if (closing || scheduled) return;
    scheduled = true;
    queueMicrotask(pump);
  }

  const facts = (key: SessionKey): LaneFacts => {
    const run = lanes.get(key)?.run;
    const s = store.summaries(now()).find((l) => l.group === key.group && l.topic === key.topic);
    return {
      running: run !== undefined,
      runId: run?.runId ?? null,
      chatJid: run?.chatJid ?? null,
      startedAt: run ? new Date(run.startedMs).toISOString() : null,
      waiting: s?.ready ?? 0,
      backoffUntil: s && s.eligible === 0 ? s.next_retry : null,
    };
  };

  const snapshot = () => {
    const active: LaneInfo[] = lanes.all().map((l) => l.info());
    const waiting: LaneInfo[] = store
      .summaries(now())
      .filter((s) => !lanes.has(s.keyId))
      .map((s) => ({
        group: s.group,
        topic: s.topic,
        chat_jid: s.chat_jid,
        state: s.eligible > 0 ? 'waiting' : 'backoff',
        since_ms: s.ready_at,
        agent_started_ms: null,
        run_id: null,
        not_before_ms: s.eligible > 0 ? null : s.next_retry,
      }));
    return { active, waiting };
  };

  const close = (graceMs: number): Promise<void> =>
    (closing ??= (async () => {
      clearTimeout(retryTimer);
      const live = lanes.all().map((l) => l.run);
      for (const run of live) run.closeStdin('shutdown');
      const all = Promise.all(live.map((r) => r.done));
      if ((await within(all, graceMs)) === 'late') {
        for (const run of live) run.kill('shutdown');
        if ((await within(all, 10_000)) === 'late') {
          log.error({ runs: lanes.all().map((l) => l.keyId) }, 'runs did not end after kill');
        }
      }
    })());

  return {
    wake,
    async stop(key, chatJid) {
      const run = lanes.get(key)?.run;
      if (!run || (chatJid !== undefined && run.chatJid !== chatJid)) return false;
      run.kill('stop');
      await run.done;
      return true;
    },
    resetSession(key) {
      const run = lanes.get(key)?.run;
      if (!run) return;
      run.sessionReset = true;
      run.closeStdin('reset');
    },
    facts,
    snapshot,
    recover() {
      const live = new Set(lanes.all().map((l) => l.run.runId));
      const n = store.recover(now(), live);
      if (n > 0) log.warn({ rows: n }, 'rows of unanswered turns of interrupted runs are ready again');
      wake();
    },
    close,
  };
}

/** 'done' when `p` settles within `ms`, else 'late'. */
async function within(p: Promise<unknown>, ms: number): Promise<'done' | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), ms)));
  try {
    return await Promise.race([p.then(() => 'done' as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
