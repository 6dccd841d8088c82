import { join } from 'node:path';
import { coerceError } from '../core/errors.js';
import { isValidFolder, sessionKeyId, type SessionKey } from '../core/types.js';
import { formatPrompt, inputLine } from './prompt.js';
import { Run, toAgentMessage, type RunHooks } from './run.js';
import { parseMountList } from './runtime/mounts.js';
import type { RunSpec } from './runtime/types.js';
import { settlementOf } from './settle.js';
import { QueueStore, type ReadyLane } from './store.js';
import type { LaneFacts, LaneInfo, QueueOptions, WorkQueue } from './types.js';

export type {
  LaneFacts,
  LaneInfo,
  LaneState,
  QueueMetrics,
  QueueOptions,
  RunResult,
  WorkQueue,
} from './types.js';

/**
 * The per-session lanes under a global cap (docs/QUEUE.md). Lanes are not objects: the database says which
 * keys have ready rows, and `runs` says which keys have a live agent. `pump` is the one place that starts
 * runs and feeds follow-ups; it is cheap, synchronous and coalesced through wake().
 *
 * Invariants: at most one run per session key (runs is keyed by it); at most maxConcurrent runs; a row is
 * handed to exactly one run (dispatch and follow-up marking are conditional on state = 'ready').
 */
export function createQueue(opts: QueueOptions): WorkQueue {
  const { config, log } = opts;
  const now = opts.now ?? Date.now;
  const store = new QueueStore(opts.db);
  const runs = new Map<string, Run>();
  let scheduled = false;
  let closing: Promise<void> | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let retryAt: number | null = null;

  const notify = (outboundId: number) => {
    try {
      opts.onOutbound?.(outboundId);
    } catch (err) {
      log.error({ err: coerceError(err).message }, 'onOutbound hook failed');
    }
  };

  const hooks: RunHooks = {
    runtime: opts.runtime,
    log,
    idleTimeoutMs: config.idleTimeoutMs,
    runTimeoutMs: config.runTimeoutMs,
    maxOutputBytes: config.maxOutputBytes,
    now,
    onReply(run, text) {
      let id: number;
      try {
        id = store.commitReply(run.runId, text, run.lastRow);
      } catch (err) {
        // Nothing was committed: the rows stay 'running' and the run's end decides their fate.
        log.error({ runId: run.runId, err: coerceError(err).message }, 'storing a reply failed');
        return false;
      }
      notify(id);
      return true;
    },
    onSessionId(run, sessionId) {
      store.saveSession(run.key, sessionId, now());
    },
    onIdle() {
      wake();
    },
    onEnd(run, end) {
      const t = now();
      try {
        const st = settlementOf(run, end, t, {
          ...config,
          maxFailures: opts.maxFailures ?? 3,
          random: opts.random,
        });
        const settled = store.settle(st);
        log.info(
          { runId: run.runId, key: run.keyId, result: st.result, error: st.error, parked: settled.parked },
          'run ended',
        );
        opts.metrics?.runFinished(st.result, (t - run.startedMs) / 1000);
        if (settled.replyId !== null) notify(settled.replyId);
      } catch (err) {
        log.error({ runId: run.runId, err: coerceError(err).message }, 'settling a run failed');
      }
      if (runs.get(run.keyId) === run) runs.delete(run.keyId);
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

  const dispatch = (lane: ReadyLane, t: number) => {
    const key: SessionKey = { group: lane.group, topic: lane.topic };
    const d = store.dispatch(key, t);
    if (!d) return;
    const run = new Run(key, d.runId, d.chatJid, d.rows, hooks, t);
    run.noteIds = d.systemNoteIds;
    runs.set(run.keyId, run);
    const messages = d.rows.map(toAgentMessage);
    const input = inputLine({
      prompt: formatPrompt(messages, d.systemNotes),
      sessionId: d.sessionId,
      group: key.group,
      topic: key.topic,
      chatJid: d.chatJid,
      messages,
      ...(opts.secrets ? { secrets: opts.secrets } : {}),
    });
    log.info({ runId: d.runId, key: run.keyId, chat: d.chatJid, messages: d.rows.length }, 'run starting');
    void run.begin(() => specOf(key, d.runId), input);
  };

  const feedFollowUps = (run: Run, t: number) => {
    if (!run.acceptsFollowUps) return;
    const rows = store.followUps(run.key, run.chatJid, t);
    if (rows.length > 0 && run.followUp(rows))
      store.joinRun(
        run.runId,
        rows.map((r) => r.id),
      );
  };

  /** Fairness: idle agents give up their slots, longest idle first, while lanes wait for one. */
  const yieldIdle = (waiting: number) => {
    let need = waiting - [...runs.values()].filter((r) => r.closing).length;
    const idle = [...runs.values()]
      .filter((r) => r.idle)
      .sort((a, b) => (a.lastOutputMs ?? 0) - (b.lastOutputMs ?? 0));
    for (const run of idle) {
      if (need-- <= 0) break;
      log.debug({ runId: run.runId, key: run.keyId }, 'idle agent yields its slot');
      run.closeStdin();
    }
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
    const waiting = store.summaries(t).filter((l) => !runs.has(sessionKeyId(l))).length;
    opts.metrics.lanes(runs.size, waiting);
  };

  const pump = () => {
    scheduled = false;
    if (closing) return;
    const t = now();
    try {
      store.rejoinParked();
      for (const run of runs.values()) feedFollowUps(run, t);
      // Only as many lanes as can start, plus up to the cap more to learn how many idle agents should
      // yield their slots (more waiting lanes than the cap cannot free more slots).
      const free = Math.max(0, config.maxConcurrent - runs.size);
      const lanes = store.nextLanes(t, new Set(runs.keys()), free + config.maxConcurrent);
      let next = 0;
      while (runs.size < config.maxConcurrent && next < lanes.length) dispatch(lanes[next++]!, t);
      const waiting = lanes.length - next;
      if (waiting > 0) yieldIdle(waiting);
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
    const run = runs.get(sessionKeyId(key));
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
    const active: LaneInfo[] = [...runs.values()].map((run) => ({
      group: run.key.group,
      topic: run.key.topic,
      chat_jid: run.chatJid,
      state: run.idle ? 'idle' : 'running',
      since_ms: run.idle ? (run.lastOutputMs ?? run.startedMs) : run.startedMs,
      agent_started_ms: run.startedMs,
      run_id: run.runId,
      not_before_ms: null,
    }));
    const waiting: LaneInfo[] = store
      .summaries(now())
      .filter((s) => !runs.has(sessionKeyId(s)))
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
      const live = [...runs.values()];
      for (const run of live) run.closeStdin();
      const all = Promise.all(live.map((r) => r.done));
      if ((await within(all, graceMs)) === 'late') {
        for (const run of live) run.kill('shutdown');
        if ((await within(all, 10_000)) === 'late') {
          log.error({ runs: [...runs.keys()] }, 'runs did not end after kill');
        }
      }
    })());

  return {
    wake,
    async stop(key, chatJid) {
      const run = runs.get(sessionKeyId(key));
      if (!run || (chatJid !== undefined && run.chatJid !== chatJid)) return false;
      run.kill('stop');
      await run.done;
      return true;
    },
    resetSession(key) {
      const run = runs.get(sessionKeyId(key));
      if (!run) return;
      run.sessionReset = true;
      run.closeStdin();
    },
    facts,
    snapshot,
    recover() {
      const live = new Set([...runs.values()].map((r) => r.runId));
      const n = store.recover(now(), live);
      if (n > 0) log.warn({ rows: n }, 'rows of interrupted runs are ready again');
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
