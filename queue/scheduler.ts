import { clearImmediate, setImmediate } from 'node:timers';
import { coerceError } from '../core/errors.js';
import { detached } from '../core/trace.js';
import type { Signals } from '../core/signals.js';
import { busyModeOf, sessionKeyId, type SessionKey } from '../core/types.js';
import { runSetup, runSpecOf, setupFields, type AgentSetup } from './agent-setup.js';
import { Lane, type Lanes } from './lane.js';
import { budgetGate } from './budget.js';
import { PumpAlarm } from './pump-alarm.js';
import { formatPrompt, inputLine } from './prompt.js';
import { agentMessage, senderRoleOf } from './recorder.js';
import { Run, type RunHooks } from './run.js';
import { withWorktree } from './worktree.js';
import { lockOrLater, LOCKED } from '../store/db.js';
import { turnWorkMs } from '../store/group-commit.js';
import { rowsAfterPollCursor } from '../store/state.js';
import type { Dispatched, GroupRow, QueueStore, ReadyLane } from '../store/queue.js';
import { sessionsOf } from '../store/sessions.js';
import type { QueueOptions } from './types.js';

/** When a dispatch found the write lock held by another process, the next pump, in ms. */
const LOCKED_RETRY_MS = 2;
/** When a pump failed (logged), the next one, in ms: ready rows never wait for a wake that may not come. */
export const PUMP_FAILED_RETRY_MS = 1000;
/**
 * While the poll loop drains a backlog larger than one of its slices (the `backlog` signal), new runs
 * start at most once per this many ms. The rows of a session still behind the loop's cursor would
 * otherwise make a run of part of a batch and another run, another agent start, for the rest; the loop's
 * one long synchronous drain held the pump for all of it before. Live runs are fed meanwhile.
 */
export const BACKLOG_HOLD_MS = 50;
/**
 * While inbound rows wait after the poll loop's cursor (the loop is behind, or rows came since its last
 * slice) or were placed less than this long ago (a writer still writing, between two transactions), an
 * agent that has just answered keeps its slot this long (ms) before it yields to a waiting lane: its
 * session's next rows may be among them, and join it as a follow-up instead of needing another run. When
 * nothing waits to be placed and nothing came lately, it yields at once.
 */
export const YIELD_GRACE_MS = 100;
/**
 * …but only in the first this many ms of its run: a session whose rows keep coming (one every 60 ms, say,
 * each answered at once) has had its share by then, and yields at its next idle moment to the lanes that
 * wait, instead of keeping its slot for as long as the stream lasts.
 */
export const YIELD_GRACE_RUN_MS = 300;
/**
 * A pump starts runs for at most about this long (ms; each start is a transaction, the first input line
 * and the agent's start): the rest wait for the next pump, after the event loop had its turn.
 */
const PUMP_SLICE_MS = 8;

/** What the scheduler is built from: the queue's options plus the parts the queue made once. */
export interface SchedulerDeps {
  opts: QueueOptions;
  store: QueueStore;
  lanes: Lanes;
  /** The run recorder: every event of a run it starts goes there. */
  hooks: RunHooks;
  signals: Signals;
  maxFailures: number;
  /** The action types a key's agent may use (its first `capabilities`); the version its batch read. */
  capabilities(key: SessionKey, accessVersion?: string | null): string[];
}

/**
 * The scheduler: which lanes get the free slots (docs/QUEUE.md). `pump` is the one place that starts runs
 * and feeds follow-up turns; it is cheap, synchronous and coalesced through `wake()` (a microtask). Slots
 * go fairly across groups (a group with no live run is served first) and, while lanes wait, idle agents
 * give theirs up. One alarm (queue/pump-alarm.ts) pumps again at each deadline: backoff, lock, failure, hold, grace.
 */
export class Scheduler {
  private scheduled = false;
  private closed = false;
  private readonly now: () => number;
  /** The deadlines by which the pump runs again (queue/pump-alarm.ts: backoff, lock, failure, hold, grace). */
  private readonly alarm: PumpAlarm;
  /** While the poll loop is behind: when the current hold began (new runs start when it has lasted long enough). */
  private holdFrom: number | undefined;
  /** The poll loop said it is behind (more rows than a slice after its cursor) and has not caught up since. */
  private behind = false;
  /** When rows were last made ready (the `queued` signal: a poll batch placed some, a task fired). */
  private placedAt: number | undefined;
  /** The next pump, when one ran out of its slice with runs left to start. */
  private nextSlice: NodeJS.Immediate | undefined;
  /** A pump left runs to start for lack of time: the pump it armed starts at least one, whatever its turn did. */
  private owed = false;
  private readonly unlisten: () => void;
  /**
   * The lanes the next pump feeds: all of them after a wake that may have made rows ready for any, or
   * only those whose run changed (idle: 200 streaming agents answering one after the other made 200 pumps
   * each read the follow-ups of 200 lanes).
   */
  private toFeed: Set<string> | 'all' = 'all';
  /** A batch taken into a new run, unless another process holds the write lock (then: a pump later). */
  private readonly take: (key: SessionKey, t: number) => Dispatched | null | typeof LOCKED;

  constructor(private readonly d: SchedulerDeps) {
    this.now = d.opts.now ?? Date.now;
    this.alarm = new PumpAlarm(this.now, () => this.wake());
    this.take = lockOrLater(d.opts.db, (key: SessionKey, t: number) => d.store.dispatch(key, t));
    const unlisten = [
      d.signals.backlog.on((more) => this.backlog(more)),
      d.signals.queued.on(() => (this.placedAt = this.now())),
    ];
    this.unlisten = () => unlisten.forEach((u) => u());
  }

  /**
   * New ready rows may exist: pump once, soon, feeding every lane. With `run`: only that run's lane may
   * take a turn it could not before (it became idle, or ended), so the pump feeds it alone, plus the lanes
   * of other wakes since the last pump. Cheap and coalesced.
   */
  wake(run?: Run): void {
    if (run === undefined) this.toFeed = 'all';
    else if (this.toFeed !== 'all') this.toFeed.add(run.keyId);
    this.schedule();
  }

  /** The next pump, in a microtask (coalesced). */
  private schedule(): void {
    if (this.closed || this.scheduled) return;
    this.scheduled = true;
    // The pump is the queue's own work: it never runs in the trace of whatever woke it.
    queueMicrotask(() => detached(() => this.pump()));
  }

  /** No run starts after this. */
  close(): void {
    this.closed = true;
    this.unlisten();
    this.alarm.clear();
    if (this.nextSlice) clearImmediate(this.nextSlice);
  }

  /** The poll loop fell behind (a hold begins, unless one is on) or caught up (runs may start now). */
  private backlog(more: boolean): void {
    this.behind = more;
    if (more) {
      this.holdFrom ??= this.now();
      return;
    }
    this.holdFrom = undefined;
    this.alarm.set('hold', null);
    this.wake();
  }

  /**
   * True while new runs wait for the poll loop to catch up, at most BACKLOG_HOLD_MS at a time: the pump
   * at the end of the hold starts runs, and the next hold begins with it. Arms the wake at the hold's end.
   */
  private holding(t: number): boolean {
    if (this.holdFrom === undefined) return false;
    const until = this.holdFrom + BACKLOG_HOLD_MS;
    if (t >= until) {
      this.holdFrom = t;
      return false;
    }
    this.alarm.soonest('hold', until);
    return true;
  }

  private pump(): void {
    this.scheduled = false;
    if (this.closed) return;
    const { store, lanes } = this.d;
    const t = this.now();
    try {
      store.rejoinParked(this.d.maxFailures);
      const feed = this.toFeed;
      this.toFeed = new Set();
      for (const lane of lanes.all()) if (feed === 'all' || feed.has(lane.keyId)) this.feedOrClose(lane, t);
      // No run starts and no idle agent yields its slot while the loop is still placing rows.
      if (this.holding(t)) return this.armBackoff(t);
      // Only as many lanes as start in this slice, plus, once the slots are full, as many more as idle
      // agents could yield theirs to; fairly across groups, read as they are taken.
      const next = store.laneCursor(t, lanes.keys(), lanes.free + lanes.cap, lanes.groups());
      // What this turn did before (a poll slice, replies) counts against the pump's slice: a pump that finds
      // it spent starts nothing and leaves the runs to the next turn, whose first pump has a slice of its
      // own. Counting the turn there too started one run per turn while many agents stream (each turn busy
      // with their blocks): 200 chats waited seconds for their agents.
      const owed = this.owed;
      this.owed = false;
      const started = performance.now() - (owed ? 0 : turnWorkMs(this.d.opts.db));
      let first = true;
      while (lanes.free > 0) {
        if ((!first || !owed) && performance.now() - started > PUMP_SLICE_MS) {
          // Lanes left to start (read one more to know): the next slice.
          if (next.next() !== undefined) return this.later();
          break;
        }
        const lane = next.next();
        if (lane === undefined) break;
        first = false;
        if (!this.dispatch(lane, t)) return this.alarm.soonest('lock', this.now() + LOCKED_RETRY_MS);
      }
      if (lanes.free === 0) {
        // Only as many waiting lanes as idle agents could give their slots to (closing ones count as
        // given): with every agent at work, none is read (a burst's pumps read five each).
        const could = lanes.yieldable();
        let waiting = 0;
        while (waiting < could && next.next() !== undefined) waiting++;
        if (waiting > 0) this.yieldIdle(waiting, t);
      }
      this.keepIdleBudget();
      this.armBackoff(t);
    } catch (err) {
      this.d.opts.log.error({ err: coerceError(err).message }, 'queue pump failed');
      this.alarm.soonest('failure', t + PUMP_FAILED_RETRY_MS);
    }
  }

  /**
   * Asks idle agents to give their slots to `waiting` lanes; while rows wait to be placed (YIELD_GRACE_MS)
   * not those that have just answered in their run's first YIELD_GRACE_RUN_MS, and a pump is armed for when
   * the first of them may. What waits is read once per pump, and only when an agent is within its grace.
   */
  private yieldIdle(waiting: number, t: number): void {
    const graceEnd = (run: Run) =>
      Math.min((run.lastOutputMs ?? run.startedMs) + YIELD_GRACE_MS, run.startedMs + YIELD_GRACE_RUN_MS);
    let coming: boolean | undefined;
    // Rows wait after the cursor, or the last were placed within the grace: a writer still writing (a
    // burst from another process) is between two of its transactions, and more rows are on their way.
    const rowsComing = () =>
      (coming ??=
        this.behind ||
        (this.placedAt !== undefined && t - this.placedAt < YIELD_GRACE_MS) ||
        rowsAfterPollCursor(this.d.opts.db));
    const keep = (run: Run) => graceEnd(run) > t && rowsComing();
    for (const run of this.d.lanes.yieldIdle(waiting, keep)) {
      run.trace.within(() =>
        this.d.opts.log.debug({ runId: run.runId, key: run.keyId }, 'idle agent yields its slot'),
      );
    }
    const kept = this.d.lanes.all().filter((l) => l.run.idle && !l.run.closing && keep(l.run));
    if (kept.length === 0) return;
    this.alarm.soonest('grace', Math.min(...kept.map((l) => graceEnd(l.run))));
  }

  /**
   * Writes a live run's next turn from its chat. A run serves one chat; another chat routed to the same
   * session key waits for it to end, never for the idle timeout (docs/QUEUE.md): while one waits, the run
   * takes only rows of its own chat older than the waiting one, and once it has answered them (at once when
   * it is idle) its stdin is closed. The next run, resuming the same session, serves the oldest waiting
   * chat, so no chat can starve another.
   */
  private feedOrClose(lane: Lane, t: number): void {
    const run = lane.run;
    const waiting = this.d.store.otherChatWaiting(lane.key, run.chatJid, t);
    const gate = budgetGate(this.d.opts, this.d.signals, run, () => this.wake());
    if (lane.feed(this.d.store, t, waiting ?? undefined, gate)) this.working(run.chatJid, true);
    if (gate?.closeIfStopped()) return;
    if (waiting === null || !run.idle) return;
    run.trace.within(() =>
      this.d.opts.log.debug({ runId: run.runId, key: run.keyId }, 'idle agent closed: another chat waits'),
    );
    run.closeStdin('idle');
  }

  /**
   * Each idle agent holds its memory until its idle timeout (a Claude agent ~280 MB): with an idle budget
   * (GATED_IDLE_AGENTS_MAX) the agents beyond it are closed, longest idle first. Runs at the end of each
   * pump not cut short by a hold, a held lock or its slice (an agent that becomes idle wakes one).
   */
  private keepIdleBudget(): void {
    const max = this.d.opts.config.idleAgentsMax;
    if (max === undefined || max === null) return;
    for (const run of this.d.lanes.closeIdleOver(max)) {
      run.trace.within(() =>
        this.d.opts.log.debug(
          { runId: run.runId, key: run.keyId, max },
          'idle agent closed: over the idle budget',
        ),
      );
    }
  }

  /**
   * The pump ran out of its slice: the next runs start in a pump of their own, in the event loop's next
   * turn, after its timers and I/O (one immediate would run in this turn's check phase, making it longer;
   * one armed from there runs in the next turn's).
   */
  private later(): void {
    if (this.nextSlice) return;
    // node:timers' setImmediate: the event loop's own check phase, whatever a test does to the global timers.
    this.nextSlice = setImmediate(() => {
      this.nextSlice = setImmediate(() => {
        this.nextSlice = undefined;
        this.owed = true;
        // The runs left to start: the lanes to feed are those of the wakes since.
        this.schedule();
      });
    });
  }

  /**
   * Takes a ready lane's batch into a new run and starts its agent; false when the write lock was held by
   * another process (nothing was taken).
   */
  private dispatch(ready: ReadyLane, t: number): boolean {
    const { store, opts } = this.d;
    const log = opts.log;
    const key: SessionKey = { group: ready.group, topic: ready.topic };
    const d = this.take(key, t);
    if (d === LOCKED) return false;
    if (!d) return true;
    for (const f of d.failed) {
      log.error({ msgId: f.id, key: sessionKeyId(key), err: f.error }, 'message failed; the lane goes on');
      opts.metrics?.rowFailed?.('queue');
    }
    if (d.rows.length === 0) {
      this.wake();
      return true;
    }
    const run = new Run(key, d.runId, d.chatJid, d.rows, this.d.hooks, t);
    run.noteIds = d.systemNoteIds;
    // Read once for the run, in this turn: its busy mode, and its settings, agent and model at its start.
    const group = store.group(key.group);
    run.busy = busyModeOf(group?.busy);
    this.d.lanes.open(new Lane(key, run));
    // The run's lines, and those of its agent's timers and streams, carry the run's trace (core/trace.ts).
    run.trace.within(() => this.start(run, d, group));
    return true;
  }

  /** Prepares a dispatched run's agent (setup, first line), starts it; Run.begin makes its spec at once. */
  private start(run: Run, d: Dispatched, g: GroupRow | undefined): void {
    const { opts } = this.d;
    const key = run.key;
    let input: string;
    let setup: AgentSetup | undefined;
    try {
      setup = runSetup(opts.setup, key, d.runId, opts.log, g);
      input = this.firstInput(key, d, setup);
    } catch (err) {
      // The run is open and its rows are running: it must end through the usual path (rows back to ready
      // with a backoff, parked after repeated failures) instead of staying open with no process.
      const e = coerceError(err);
      void run.begin(() => {
        throw e;
      }, '');
      return;
    }
    this.working(d.chatJid, true);
    opts.log.info(
      { runId: d.runId, key: run.keyId, chat: d.chatJid, messages: d.rows.length },
      'run starting',
    );
    void run.begin(() => {
      const spec = runSpecOf(opts.config.groupsDir, key, d.runId, g, setup);
      // A group bound to no repository (most) has no worktree to find or make.
      if (g?.repo !== 1 && !opts.githubWorktrees) return spec;
      const now = opts.now ? { now: opts.now } : {};
      const { db, log, githubWorktrees } = opts;
      const ctx = {
        db,
        groupsDir: opts.config.groupsDir,
        log,
        ...now,
        signals: this.d.signals,
        githubWorktrees,
      };
      return withWorktree(ctx, spec, key, d.chatJid);
    }, input);
  }

  /**
   * The agent's first stdin line: the batch, the session to resume (or fork), the capabilities, and the
   * group's agent, model, configuration and secrets.
   */
  private firstInput(key: SessionKey, d: Dispatched, setup: AgentSetup | undefined): string {
    const { opts } = this.d;
    const senderRole = senderRoleOf(opts);
    const messages = d.rows.map((r) => agentMessage(opts, senderRole, key.group, r));
    const forkFrom = d.sessionId === null ? sessionsOf(opts.db).forkSource(key) : undefined;
    const memory = this.d.hooks.memory?.(key.group, d.rows) ?? [];
    return inputLine({
      turn: 1,
      prompt: formatPrompt(messages, d.systemNotes, memory),
      sessionId: d.sessionId,
      ...(forkFrom !== undefined ? { forkFrom } : {}),
      group: key.group,
      topic: key.topic,
      chatJid: d.chatJid,
      messages,
      ...(memory.length > 0 ? { memory: [...memory] } : {}),
      capabilities: this.d.capabilities(key, d.rows[0]?.access_version),
      ...setupFields(setup, opts.secrets),
    });
  }

  private working(chatJid: string, on: boolean): void {
    this.d.signals.working.fire({ chatJid, on });
  }

  /** A lane in backoff starts when its backoff ends: the earliest retry of a ready row, or none. */
  private armBackoff(t: number): void {
    this.alarm.set('backoff', this.d.store.nextRetry(t));
  }
}
