import { sessionKeyId, type SessionKey } from '../core/types.js';
import type { Run } from './run.js';
import type { BatchRow, QueueStore } from '../store/queue.js';
import type { LaneInfo } from './types.js';

/**
 * A lane is one session key while an agent serves it (docs/QUEUE.md). Like a key of a per-key promise
 * chain that is deleted once idle, a lane exists only as long as its run: a key whose rows wait for an
 * agent is just rows in the database (`state = 'ready'`), and becomes a lane when a slot is free.
 */
export class Lane {
  /** sessionKeyId(key): the map key, computed once. */
  readonly keyId: string;

  constructor(
    readonly key: SessionKey,
    /** The one run of this key. A lane never changes run: it ends when its run ends. */
    readonly run: Run,
  ) {
    this.keyId = sessionKeyId(key);
  }

  /**
   * Writes the ready rows of the run's chat (those older than row `before`, when given: another chat waits
   * from that row on) as the next turn, when the agent may take one. The rows join
   * the turn in the database first, so a crash between the two finds them in a dead run and gives them
   * back; a write that fails gives them back at once. True when a turn was written.
   *
   * While the agent works on a turn, the group's busy mode (docs/PROTOCOL.md) says what the new turn does:
   * `interrupt` (or an /interrupt's text) first asks the agent to stop the turn in progress, `steer` marks
   * the line so the agent shows it to the model inside that turn, `queue` just writes it.
   */
  feed(
    store: QueueStore,
    now: number,
    before?: number,
    /** A pause point (the budget, queue/budget-asks.ts): false keeps the rows where they are. */
    gate?: (rows: readonly BatchRow[]) => boolean,
  ): boolean {
    const run = this.run;
    if (!run.acceptsFollowUps) return false;
    const ready = store.followUps(this.key, run.chatJid, now);
    const rows = before === undefined ? ready : ready.filter((r) => r.id < before);
    if (rows.length === 0 || (gate && !gate(rows))) return false;
    const busy = run.turns.open > 0;
    const interrupts = busy && (run.busy === 'interrupt' || rows.some((r) => r.interrupts === 1));
    if (interrupts) run.interrupt();
    const steer = busy && !interrupts && run.busy === 'steer';
    const turn = run.turns.written + 1;
    const joined = store.joinTurn(run.runId, turn, rows);
    if (joined.length === 0) return false;
    // Notes written since the run started (a refused action) reach the agent in this line.
    const notes = store.takeNotes(this.key, now);
    const texts = notes.map((n) => n.content);
    if (run.writeTurn(joined, texts, steer)) return true;
    store.leaveTurn(run.runId, turn);
    store.restoreNotes(notes.map((n) => n.id));
    return false;
  }

  /** The lane as /status and the dashboard show it. */
  info(): LaneInfo {
    const run = this.run;
    return {
      group: this.key.group,
      topic: this.key.topic,
      chat_jid: run.chatJid,
      state: run.idle ? 'idle' : 'running',
      since_ms: run.idle ? (run.lastOutputMs ?? run.startedMs) : run.startedMs,
      agent_started_ms: run.startedMs,
      run_id: run.runId,
      not_before_ms: null,
    };
  }
}

/** The live lanes under the global cap. */
export class Lanes {
  /** By keyId. At most one lane per key; never more than `cap` entries. */
  private readonly live = new Map<string, Lane>();

  constructor(
    /** GATED_MAX_CONCURRENT: runs at once across the instance. */
    readonly cap: number,
  ) {}

  get size(): number {
    return this.live.size;
  }

  /** Slots free under the cap. */
  get free(): number {
    return Math.max(0, this.cap - this.live.size);
  }

  /** The keyIds that have a live run (lanes that must not be dispatched again). */
  keys(): Set<string> {
    return new Set(this.live.keys());
  }

  /** The groups that have a live run (the queue gives a slot to every other waiting group first). */
  groups(): Set<string> {
    return new Set([...this.live.values()].map((lane) => lane.run.key.group));
  }

  all(): Lane[] {
    return [...this.live.values()];
  }

  get(key: SessionKey): Lane | undefined {
    return this.live.get(sessionKeyId(key));
  }

  has(keyId: string): boolean {
    return this.live.has(keyId);
  }

  /** Opens a lane for a dispatched run. Refuses a second lane for a key or one over the cap. */
  open(lane: Lane): void {
    if (this.live.has(lane.keyId)) throw new Error(`lane ${lane.keyId} already has a run`);
    if (this.live.size >= this.cap) throw new Error('no free slot');
    this.live.set(lane.keyId, lane);
  }

  /** Ends the lane of `run` (a no-op when another run already took the key). */
  end(run: Run): void {
    if (this.live.get(run.keyId)?.run === run) this.live.delete(run.keyId);
  }

  /**
   * The idle budget (GATED_IDLE_AGENTS_MAX): beyond `max` idle agents, the longest idle (the oldest last
   * answer) are closed first. Agents already closing hold no place in it. Returns the runs closed.
   */
  closeIdleOver(max: number): Run[] {
    const idle = this.all()
      .map((l) => l.run)
      .filter((r) => r.idle && !r.closing)
      .sort((a, b) => (a.lastOutputMs ?? 0) - (b.lastOutputMs ?? 0));
    const over = idle.slice(0, Math.max(0, idle.length - max));
    for (const run of over) run.closeStdin('idle');
    return over;
  }

  /** Runs idle or closing: the most slots that waiting lanes could be given now (yieldIdle). */
  yieldable(): number {
    let n = 0;
    for (const lane of this.live.values()) if (lane.run.idle || lane.run.closing) n++;
    return n;
  }

  /**
   * Fairness: while `waiting` lanes want a slot, idle agents give theirs up, longest idle first (closing
   * ones already count as given up), except those `keep` names.
   */
  yieldIdle(waiting: number, keep: (run: Run) => boolean = () => false): Run[] {
    const runs = this.all().map((l) => l.run);
    let need = waiting - runs.filter((r) => r.closing).length;
    const idle = runs
      .filter((r) => r.idle && !keep(r))
      .sort((a, b) => (a.lastOutputMs ?? 0) - (b.lastOutputMs ?? 0));
    const yielded: Run[] = [];
    for (const run of idle) {
      if (need-- <= 0) break;
      run.closeStdin('idle');
      yielded.push(run);
    }
    return yielded;
  }
}
