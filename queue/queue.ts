import { createSignals } from '../core/signals.js';
import type { SessionKey } from '../core/types.js';
import { ActionApplier } from './actions/apply.js';
import { capabilitiesByVersion } from './actions/capabilities.js';
import { DEFAULT_CHAIN_BOUNDS } from './actions/chain.js';
import { Lanes } from './lane.js';
import { runRecorder } from './recorder.js';
import { Scheduler } from './scheduler.js';
import { worktreeSweeper } from './worktree.js';
import { ActionStore } from '../store/actions.js';
import { QueueStore } from '../store/queue.js';
import { ReadyKeys } from '../store/ready-keys.js';
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
 * The queue of session lanes under the global cap (docs/QUEUE.md), made of two parts: the scheduler
 * (scheduler.ts: which lanes get the slots, fairly) and the run recorder (recorder.ts: what a run's events
 * do to rows, each a QueueStore transaction). The lanes (lane.ts) hold who runs; the turns (turns.ts) hold
 * what each run answered. This file makes them once and answers the operator's questions about them.
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
  const signals = opts.signals ?? createSignals();
  const lanes = new Lanes(config.maxConcurrent);
  const applier = actionApplier(opts);
  const hooks = runRecorder({
    opts,
    store,
    applier,
    signals,
    maxFailures,
    // A worktree asked to go (/new #topic, an issue closed) is removed once its topic's run ended.
    events: { ended: (run) => void (lanes.end(run), sweepWorktrees()), wake: (run) => scheduler.wake(run) },
  });
  const sweepWorktrees = worktreeSweeper(opts.db, (key) => lanes.get(key) !== undefined, log, signals);
  const scheduler = new Scheduler({
    opts,
    store,
    lanes,
    hooks,
    signals,
    maxFailures,
    capabilities:
      opts.capabilities ??
      capabilitiesByVersion(new ActionStore(opts.db), (group) => applier.capabilities(group)),
  });
  const wake = () => scheduler.wake();
  const unlisten = [signals.queued.on(wake), signals.attached.on(wake)];

  const readyKeys = new ReadyKeys(opts.db);
  opts.metrics?.lanesFrom(() => laneCounts(readyKeys, lanes));

  let closing: Promise<void> | undefined;
  const close = (graceMs: number): Promise<void> =>
    (closing ??= (async () => {
      for (const off of unlisten) off();
      scheduler.close();
      await endRuns(lanes, graceMs, log);
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
    interrupt(key, chatJid) {
      const run = lanes.get(key)?.run;
      return run !== undefined && run.chatJid === chatJid && run.interrupt();
    },
    resetSession(key) {
      const run = lanes.get(key)?.run;
      if (!run) return void sweepWorktrees();
      run.sessionReset = true;
      run.closeStdin('reset');
    },
    facts: (key) => laneFacts(store, lanes, key, now()),
    active: () => lanes.all().map((l) => l.info()),
    overdue: () =>
      lanes
        .all()
        .map((l) => ({ runId: l.run.runId, byMs: l.run.overdueMs(now()) }))
        .filter((o) => o.byMs > 0),
    snapshot: () => laneSnapshot(store, lanes, now()),
    recover() {
      const live = new Set(lanes.all().map((l) => l.run.runId));
      const n = store.recover(now(), live);
      if (n > 0) log.warn({ rows: n }, 'rows of unanswered turns of interrupted runs are ready again');
      wake();
      void sweepWorktrees();
    },
    close,
  };
}

/** The applier of the agents' actions, with the queue's bounds on chains of delegations and tasks. */
function actionApplier(opts: QueueOptions): ActionApplier {
  return new ActionApplier({
    db: opts.db,
    log: opts.log.child({ part: 'actions' }),
    tz: opts.actions?.tz ?? 'UTC',
    maxDepth: opts.actions?.maxDepth ?? DEFAULT_CHAIN_BOUNDS.maxDepth,
    maxHops: opts.actions?.maxHops ?? DEFAULT_CHAIN_BOUNDS.maxHops,
    ...(opts.actions?.taskBounds ? { taskBounds: opts.actions.taskBounds } : {}),
    ...(opts.actions?.memoryBounds ? { memoryBounds: opts.actions.memoryBounds } : {}),
    ...(opts.actions?.metrics ? { metrics: opts.actions.metrics } : {}),
  });
}

/** What the operator asks about one session key: its run, and what waits in its lane. */
function laneFacts(store: QueueStore, lanes: Lanes, key: SessionKey, now: number): LaneFacts {
  const run = lanes.get(key)?.run;
  const s = store.summaries(now).find((l) => l.group === key.group && l.topic === key.topic);
  return {
    running: run !== undefined,
    runId: run?.runId ?? null,
    chatJid: run?.chatJid ?? null,
    startedAt: run ? new Date(run.startedMs).toISOString() : null,
    waiting: s?.ready ?? 0,
    backoffUntil: s && s.eligible === 0 ? s.next_retry : null,
  };
}

/** Every lane: those with a live run, and those waiting for a slot or in a backoff. */
function laneSnapshot(
  store: QueueStore,
  lanes: Lanes,
  now: number,
): { active: LaneInfo[]; waiting: LaneInfo[] } {
  const active: LaneInfo[] = lanes.all().map((l) => l.info());
  const waiting: LaneInfo[] = store
    .summaries(now)
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
}

/**
 * The lane gauges' values, read at each scrape (the dashboard's cluster panel asks every second): the live
 * lanes from memory, the waiting ones (keys with ready rows and no live run, in a backoff or not) by a
 * skip through the ready index, a few seeks per key rather than a read of the whole backlog.
 */
function laneCounts(readyKeys: ReadyKeys, lanes: Lanes): { active: number; waiting: number } {
  try {
    return { active: lanes.size, waiting: readyKeys.count((id) => lanes.has(id)) };
  } catch {
    return { active: lanes.size, waiting: 0 };
  }
}

/** Shutdown of the live runs: stdin closed, `graceMs` to finish, then killed (and 10 s more to exit). */
async function endRuns(lanes: Lanes, graceMs: number, log: QueueOptions['log']): Promise<void> {
  const live = lanes.all().map((l) => l.run);
  for (const run of live) run.closeStdin('shutdown');
  const all = Promise.all(live.map((r) => r.done));
  if ((await within(all, graceMs)) === 'late') {
    for (const run of live) run.kill('shutdown');
    if ((await within(all, 10_000)) === 'late') {
      log.error({ runs: lanes.all().map((l) => l.keyId) }, 'runs did not end after kill');
    }
  }
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
