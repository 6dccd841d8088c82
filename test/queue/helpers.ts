/**
 * Queue test kit: a Runtime whose agents the test drives by hand (it stands in for the agent program, not
 * for any of our code), ready rows written the way the gateway writes them, and a real-setImmediate flush
 * that still works while vitest fakes the timers.
 */
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, expect, vi } from 'vitest';
import type { Db } from '../../store/db.js';
import { insertInbound } from '../../store/messages.js';
import { silentLogger } from '../../core/log.js';
import { OUTPUT_END, OUTPUT_START } from '../../queue/protocol/parser.js';
import { createQueue } from '../../queue/queue.js';
import type { AgentExit, AgentHandle, Runtime, RunSpec } from '../../queue/runtime/types.js';
import type { QueueOptions, WorkQueue } from '../../queue/types.js';
import type { Signals } from '../../core/signals.js';
import { recordingSignals } from '../helpers/signals.js';

const realSetImmediate = globalThis.setImmediate;

/** Lets streams, microtasks and the queue's coalesced pump run (real event-loop turns, fake clock). */
export async function flush(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((r) => realSetImmediate(r));
}

/** A promise with its resolve/reject in hand. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((a, b) => {
    resolve = a;
    reject = b;
  });
  return { promise, resolve, reject };
}

/** One agent, driven by the test. */
export class HandAgent implements AgentHandle {
  readonly stdout = new PassThrough();
  readonly lines: string[] = [];
  stdinClosed = false;
  killed = false;
  /** When false, writes fail as they would to an agent that is exiting. */
  accepting = true;
  private exit!: (e: AgentExit) => void;
  readonly exited = new Promise<AgentExit>((r) => (this.exit = r));
  /** True once the agent has exited. */
  ended = false;

  constructor(readonly spec: RunSpec) {}

  get stdinOpen(): boolean {
    return !this.stdinClosed && !this.ended && this.accepting;
  }

  write(line: string): boolean {
    if (!this.stdinOpen) return false;
    this.lines.push(line);
    return true;
  }

  closeStdin(): void {
    this.stdinClosed = true;
  }

  kill(): void {
    this.killed = true;
    this.finish({ code: null, signal: 'SIGKILL', stderrTail: '' });
  }

  /** The parsed stdin lines. */
  inputs(): Array<Record<string, unknown> & { messages: Array<{ id: number; content: string }> }> {
    return this.lines.map((l) => JSON.parse(l));
  }

  /** Prints one output block (with some noise around it). */
  reply(result: string | null, extra: Record<string, unknown> = {}): void {
    this.stdout.write(
      `thinking...\n${OUTPUT_START}\n${JSON.stringify({ status: 'ok', result, ...extra })}\n`,
    );
    this.stdout.write(`${OUTPUT_END}\n`);
  }

  /** The agent exits: stdout ends, then `exited` resolves. */
  finish(e: Partial<AgentExit> = {}): void {
    if (this.ended) return;
    this.ended = true;
    this.stdout.end();
    this.exit({
      code: e.code === undefined ? 0 : e.code,
      signal: e.signal ?? null,
      stderrTail: e.stderrTail ?? '',
    });
  }
}

/**
 * A start the test holds: it resolves only when the test calls `arrive` (as a start through the spawner
 * whose socket gated never received would never resolve at all); `signal` is what the run passed.
 */
export interface HeldStart {
  spec: RunSpec;
  signal: AbortSignal | undefined;
  /** The agent's handle finally comes back, as a late start would. */
  arrive(): HandAgent;
}

/**
 * A Runtime whose agents are HandAgents; `startFails` makes the next starts reject, `startHolds` makes the
 * next starts wait in `held` until the test lets them through.
 */
export class HandRuntime implements Runtime {
  readonly name = 'hand';
  readonly agents: HandAgent[] = [];
  readonly held: HeldStart[] = [];
  startFails = 0;
  startHolds = 0;
  private waiters: Array<(a: HandAgent) => void> = [];

  async start(spec: RunSpec): Promise<AgentHandle> {
    if (this.startFails > 0) {
      this.startFails--;
      throw new Error('no such image');
    }
    if (this.startHolds > 0) {
      this.startHolds--;
      return new Promise<AgentHandle>((resolve) => {
        this.held.push({
          spec,
          signal: spec.signal,
          arrive: () => {
            const a = new HandAgent(spec);
            this.agents.push(a);
            resolve(a);
            return a;
          },
        });
      });
    }
    const a = new HandAgent(spec);
    this.agents.push(a);
    this.waiters.shift()?.(a);
    return a;
  }

  async ping(): Promise<void> {}

  /** Agents alive (not finished). */
  live(): HandAgent[] {
    return this.agents.filter((a) => !a.ended);
  }
}

/** Writes an inbound row and releases it as the gateway does: state 'ready', key, ready_at. */
export function ready(
  db: Db,
  row: { chat?: string; group?: string; topic?: string; content?: string; readyAt?: number; msgId?: string },
): number {
  const id = insertInbound(db, {
    chat_jid: row.chat ?? 'test:1',
    sender: 'u1',
    sender_name: 'Ursula',
    content: row.content ?? 'hello',
    platform_msg_id: row.msgId ?? null,
  })!;
  db.prepare(
    `UPDATE messages SET state = 'ready', group_folder = ?, session_topic = ?, ready_at = ?, target = ? WHERE id = ?`,
  ).run(row.group ?? 'g1', row.topic ?? '', row.readyAt ?? id, row.group ?? 'g1', id);
  return id;
}

/** The state column of some rows, by id. */
export function states(db: Db, ids: number[]): string[] {
  return ids.map((id) => db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id) as string);
}

/** A queue on `db` with a HandRuntime and small, explicit limits. */
export function handQueue(
  db: Db,
  over: Partial<QueueOptions['config']> & {
    onOutbound?: (id: number) => void;
    secrets?: Record<string, string>;
    metrics?: QueueOptions['metrics'];
    /** The queue's logger (default: silent). */
    log?: QueueOptions['log'];
    /** The queue's clock (default: Date.now). */
    now?: () => number;
    /** The action types each key's agent may use (default: the registered groups' own). */
    capabilities?: QueueOptions['capabilities'];
  } = {},
): { queue: WorkQueue; runtime: HandRuntime; outbound: number[]; signals: Signals } {
  const runtime = new HandRuntime();
  const { signals, outbound } = recordingSignals();
  const { onOutbound, secrets, metrics, log, now, capabilities, ...config } = over;
  if (onOutbound) signals.outbound.on((id) => onOutbound(id!));
  const queue = createQueue({
    db,
    runtime,
    config: {
      groupsDir: '/nonexistent/groups',
      maxConcurrent: 5,
      idleTimeoutMs: 30_000,
      runTimeoutMs: 600_000,
      maxOutputBytes: 1 << 20,
      ...config,
    },
    log: log ?? silentLogger(),
    random: () => 0.5,
    signals,
    ...(secrets ? { secrets } : {}),
    ...(metrics ? { metrics } : {}),
    ...(now ? { now } : {}),
    ...(capabilities ? { capabilities } : {}),
  });
  return { queue, runtime, outbound, signals };
}

/**
 * Fakes the clock for each test of the file (it starts at 1,000,000) and closes the queues the test pushed
 * into the returned list afterwards; with `leftTimers` false the file may end with timers still armed.
 */
export function useQueueClock(opts: { leftTimers?: boolean } = {}): WorkQueue[] {
  const queues: WorkQueue[] = [];
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(async () => {
    const closing = queues.splice(0).map((q) => q.close(0));
    await vi.runOnlyPendingTimersAsync();
    await Promise.all(closing);
    if (opts.leftTimers !== false) expect(vi.getTimerCount()).toBe(0);
    vi.useRealTimers();
  });
  return queues;
}
