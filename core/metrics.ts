import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** How a run ended (session_log.result). */
import { PLATFORM_RE, type RunResult } from './types.js';

/** What happened to one outbound delivery attempt. */
export type OutboundOutcome = 'delivered' | 'retried' | 'failed';

/** Options for createMetrics. */
export interface MetricsOptions {
  /** Also collect Node's process metrics (CPU, memory, event loop lag). Default false: tests make many. */
  processMetrics?: boolean;
}

/**
 * The gateway's Prometheus metrics. Each instance owns its own prom-client Registry (never the global one),
 * so tests and several gateways in one process do not share counters. The pipeline calls the helpers; the
 * HTTP server serves `text()` at /metrics.
 */
/** Where agents ran, as the dashboard shows it: one row per (runtime, node), plus lanes under the cap. */
export interface ClusterFacts {
  nodes: Array<{
    runtime: string;
    /** The swarm node that ran the task; "local" for the docker runtime on one engine. */
    node: string;
    started: number;
    /** Create → running of the agent's container or service (for swarm: includes waiting for capacity). */
    meanStartSeconds: number;
    maxStartSeconds: number;
    /** Epoch ms of the latest start. */
    lastStartMs: number;
  }>;
  /** Lanes with a live agent, and lanes ready but waiting for a slot under GATED_MAX_CONCURRENT. */
  lanesActive: number;
  lanesWaiting: number;
  /** The runtime this gated starts agents with (GATED_RUNTIME), when the caller knows it. */
  runtime?: string;
}

/** What the checkpoint worker reports of one look at the WAL (store/checkpoint.ts). */
export interface WalCheckpointPass {
  passive: { ms: number };
  /** The TRUNCATE run when the WAL was over its bound. */
  bound?: { ms: number };
  walBytes: number;
}

/** What holds messages back and can say how many (gateway/impulse.ts `ImpulseGate`), read at each scrape. */
export interface HeldCounter {
  heldCount(): number;
}

export interface Metrics {
  readonly registry: Registry;
  /** One inbound message seen by the poll loop. */
  messagesIn(platform: string, verb: string): void;
  /** One message routed to a target (folder, builtin:*, daemon:*). */
  routed(target: string): void;
  /** One message no route matched. */
  unrouted(): void;
  /** Where the held-messages gauge reads its value at each scrape (the impulse gate). */
  heldFrom(gate: HeldCounter): void;
  /**
   * One run finished: `seconds` is its lifetime (agent start → exit), `idleSeconds` the part its agent sat
   * idle waiting for a follow-up (the rest is work; docs/WEB.md "Runs: work and idle"). Without
   * `idleSeconds` (not known) only the lifetime is observed.
   */
  runFinished(result: RunResult, seconds: number, idleSeconds?: number | null): void;
  /** Lanes with a live agent, and lanes ready but waiting for a slot under the global cap, as fixed values. */
  lanes(active: number, waiting: number): void;
  /**
   * Where the lane gauges read their values at each scrape (the queue's lanes as they are then): a gauge
   * set when something changed goes stale when the next change reports nothing.
   */
  lanesFrom(read: () => { active: number; waiting: number }): void;
  /** One outbound delivery attempt's outcome (per row: delivered once, or failed once, retried n times). */
  outbound(outcome: OutboundOutcome): void;
  /** One action of an agent's output block: applied, refused (malformed or not allowed), or ignored. */
  action(type: string, outcome: 'applied' | 'refused' | 'ignored'): void;
  /** Wall time of one poll tick (read new rows, run the layers, release, dispatch). */
  pollTick(seconds: number): void;
  /** One row ended `failed` because processing it threw (`stage`: gateway or queue). */
  rowFailed(stage: string): void;
  /** One agent started by a container runtime: on which node (swarm) and how long the start took. */
  agentStarted(runtime: string, node: string, seconds: number): void;
  /** Agents started per runtime and node since this process started, and the lanes (the cluster panel). */
  cluster(): ClusterFacts;
  /** One look of the checkpoint worker (store/checkpoint.ts): its checkpoints' times and the WAL's size. */
  walCheckpoint(pass: WalCheckpointPass): void;
  /** The exposition text for /metrics. */
  text(): Promise<string>;
  /** The Content-Type of `text()`. */
  readonly contentType: string;
}

// Verbs are free text written by adapters and by anyone with sqlite3; an unbounded label value set would
// grow the registry without limit, so uncommon verbs are counted together.
const KNOWN_VERBS = new Set([
  'message',
  'mention',
  'reply',
  'reaction',
  'typing',
  'join',
  'edit',
  'delete',
  'follow',
  'quote',
  'close',
]);
const ACTION_LABELS = new Set(['send', 'delegate', 'escalate', 'schedule', 'react', 'partial']);

function verbLabel(verb: string): string {
  return KNOWN_VERBS.has(verb) ? verb : 'other';
}

function platformLabel(platform: string): string {
  return PLATFORM_RE.test(platform) ? platform : 'other';
}

/**
 * Counts per label set kept in a Map and added to their counter when it is read (a scrape): a counter
 * counted once per message would hash its labels in prom-client on every message.
 */
class Tally {
  private readonly counts = new Map<string, { labels: Record<string, string>; n: number }>();

  add(key: string, labels: Record<string, string>): void {
    const c = this.counts.get(key);
    if (c) c.n += 1;
    else this.counts.set(key, { labels, n: 1 });
  }

  /** Adds what was counted since the last read to `counter`. */
  flush(counter: { inc(labels: Record<string, string>, n: number): void }): void {
    for (const c of this.counts.values()) {
      if (c.n > 0) counter.inc(c.labels, c.n);
      c.n = 0;
    }
  }
}

/** The counters of the inbound side: what the poll loop saw, where it went, what failed. */
function inboundInstruments(registers: Registry[]) {
  const seen = new Tally();
  const routes = new Tally();
  new Counter({
    name: 'gated_messages_in_total',
    help: 'Inbound messages seen by the poll loop, by platform and verb',
    labelNames: ['platform', 'verb'] as const,
    registers,
    collect() {
      seen.flush(this);
    },
  });
  new Counter({
    name: 'gated_routed_total',
    help: 'Messages routed, by target',
    labelNames: ['target'] as const,
    registers,
    collect() {
      routes.flush(this);
    },
  });
  const unrouted = new Counter({
    name: 'gated_unrouted_total',
    help: 'Messages no route matched (stored, never dispatched)',
    registers,
  });
  const held: { gate?: HeldCounter } = {};
  new Gauge({
    name: 'gated_held_messages',
    help: 'Messages currently held by the impulse gate',
    registers,
    // Read at scrape time: the gate's state is the held rows, so there is nothing to keep in step.
    collect() {
      if (held.gate) this.set(held.gate.heldCount());
    },
  });
  const pollTick = new Histogram({
    name: 'gated_poll_tick_seconds',
    help: 'Wall time of one poll tick',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const rowsFailed = new Counter({
    name: 'gated_rows_failed_total',
    help: 'Rows that ended failed because processing them threw (wrong column types, a layer error)',
    labelNames: ['stage'] as const,
    registers,
  });
  for (const stage of ['gateway', 'queue']) rowsFailed.inc({ stage }, 0);
  return { seen, routes, unrouted, held, pollTick, rowsFailed };
}

/** The buckets of a run's lifetime, work and idle time, in seconds. */
const RUN_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** The counters of runs and what they produce: results, lanes, deliveries, actions. */
function runInstruments(registers: Registry[]) {
  const runs = new Counter({
    name: 'gated_runs_total',
    help: 'Agent runs finished, by result',
    labelNames: ['result'] as const,
    registers,
  });
  const runTime = (name: string, help: string) =>
    new Histogram({ name, help, labelNames: ['result'] as const, buckets: RUN_BUCKETS, registers });
  const runSeconds = runTime(
    'gated_run_duration_seconds',
    'Lifetime of agent runs (agent start to exit, the idle wait for follow-ups included), by result',
  );
  // Lifetime = work + idle; both are observed for each run whose idle time is known, so their sums add up.
  const workSeconds = runTime(
    'gated_run_work_seconds',
    'Time agents worked in a run (agent start to exit minus the idle waits for a follow-up), by result',
  );
  const idleSeconds = runTime(
    'gated_run_idle_seconds',
    'Time agents sat idle in a run, waiting for a follow-up until the idle timeout, by result',
  );
  // Read at scrape time from where the queue says (lanesFrom), or the values last reported (lanes).
  const lanes: { now: () => { active: number; waiting: number } } = {
    now: () => ({ active: 0, waiting: 0 }),
  };
  new Gauge({
    name: 'gated_lanes_active',
    help: 'Session lanes with a live agent',
    registers,
    collect() {
      this.set(lanes.now().active);
    },
  });
  new Gauge({
    name: 'gated_lanes_waiting',
    help: 'Session lanes ready but waiting for a slot under the global cap',
    registers,
    collect() {
      this.set(lanes.now().waiting);
    },
  });
  const outbound = new Counter({
    name: 'gated_outbound_total',
    help: 'Outbound delivery attempts, by outcome (delivered, retried, failed)',
    labelNames: ['outcome'] as const,
    registers,
  });
  const actions = new Counter({
    name: 'gated_actions_total',
    help: "Actions in agents' output blocks, by type and outcome (applied, refused, ignored)",
    labelNames: ['type', 'outcome'] as const,
    registers,
  });
  // Pre-create the label sets a dashboard expects to see at zero rather than missing.
  for (const r of ['ok', 'error', 'timeout', 'stopped'] as const) runs.inc({ result: r }, 0);
  for (const o of ['delivered', 'retried', 'failed'] as const) outbound.inc({ outcome: o }, 0);
  return { runs, runSeconds, workSeconds, idleSeconds, lanes, outbound, actions };
}

/** The checkpoint worker's checkpoints, by mode, and the WAL's size when it last looked. */
function walInstruments(registers: Registry[]) {
  const seconds = new Histogram({
    name: 'gated_wal_checkpoint_seconds',
    help: 'Wall time of WAL checkpoints run by the checkpoint worker (off the event loop), by mode',
    labelNames: ['mode'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers,
  });
  const bytes = new Gauge({
    name: 'gated_wal_bytes',
    help: "Size of the database's WAL file when the checkpoint worker last looked",
    registers,
  });
  return (p: WalCheckpointPass) => {
    seconds.observe({ mode: 'passive' }, p.passive.ms / 1000);
    if (p.bound) seconds.observe({ mode: 'truncate' }, p.bound.ms / 1000);
    bytes.set(p.walBytes);
  };
}

/**
 * Agent starts per runtime and node: the two instruments, and the cluster panel's figures kept beside them
 * (reading them back from prom-client is async).
 */
class AgentStarts {
  private readonly seconds;
  private readonly perNode;
  private readonly nodes = new Map<string, ClusterFacts['nodes'][number] & { totalSeconds: number }>();

  constructor(registers: Registry[]) {
    this.seconds = new Histogram({
      name: 'gated_agent_start_seconds',
      help: 'Create to running of one agent container or swarm service, by runtime',
      labelNames: ['runtime'] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.perNode = new Counter({
      name: 'gated_agent_starts_total',
      help: 'Agents started, by runtime and node (the swarm node that ran the task; "local" otherwise)',
      labelNames: ['runtime', 'node'] as const,
      registers,
    });
  }

  started(runtime: string, node: string, seconds: number): void {
    this.seconds.observe({ runtime }, seconds);
    // Node ids are few (the swarm's nodes) and set by the operator's cluster, not by chat input.
    this.perNode.inc({ runtime, node });
    const key = `${runtime}\u0000${node}`;
    const n = this.nodes.get(key) ?? {
      runtime,
      node,
      started: 0,
      meanStartSeconds: 0,
      maxStartSeconds: 0,
      lastStartMs: 0,
      totalSeconds: 0,
    };
    n.started += 1;
    n.totalSeconds += seconds;
    n.meanStartSeconds = n.totalSeconds / n.started;
    n.maxStartSeconds = Math.max(n.maxStartSeconds, seconds);
    n.lastStartMs = Date.now();
    this.nodes.set(key, n);
  }

  /** The nodes, sorted by runtime and node. */
  list(): ClusterFacts['nodes'] {
    return [...this.nodes.values()]
      .map(({ totalSeconds: _, ...n }) => n)
      .sort((a, b) => a.runtime.localeCompare(b.runtime) || a.node.localeCompare(b.node));
  }
}

/** Creates a fresh registry with gated's metrics (all prefixed `gated_`). */
export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const inbound = inboundInstruments(registers);
  const runs = runInstruments(registers);
  const starts = new AgentStarts(registers);
  const walCheckpoint = walInstruments(registers);
  if (opts.processMetrics) collectDefaultMetrics({ register: registry, prefix: 'gated_' });

  return {
    registry,
    messagesIn: (platform, verb) => {
      // Keyed by the labels, not the raw values: a stranger's made-up verbs all count as one.
      const labels = { platform: platformLabel(platform), verb: verbLabel(verb) };
      inbound.seen.add(`${labels.platform}\0${labels.verb}`, labels);
    },
    routed: (target) => inbound.routes.add(target, { target }),
    unrouted: () => inbound.unrouted.inc(),
    heldFrom: (gate) => {
      inbound.held.gate = gate;
    },
    runFinished: (result, seconds, idleSeconds) => {
      runs.runs.inc({ result });
      runs.runSeconds.observe({ result }, seconds);
      if (idleSeconds === null || idleSeconds === undefined) return;
      // As the dashboard splits it (http/queries.ts runSplit): idle is never more than the lifetime.
      const idle = Math.min(Math.max(0, idleSeconds), Math.max(0, seconds));
      runs.workSeconds.observe({ result }, Math.max(0, seconds) - idle);
      runs.idleSeconds.observe({ result }, idle);
    },
    lanes: (active, waiting) => {
      runs.lanes.now = () => ({ active, waiting });
    },
    lanesFrom: (read) => {
      runs.lanes.now = read;
    },
    outbound: (outcome) => runs.outbound.inc({ outcome }),
    // Agents write the type: anything but the known names is counted together, so labels stay bounded.
    action: (type, outcome) => runs.actions.inc({ type: ACTION_LABELS.has(type) ? type : 'other', outcome }),
    pollTick: (seconds) => inbound.pollTick.observe(seconds),
    rowFailed: (stage) => inbound.rowsFailed.inc({ stage: stage === 'queue' ? 'queue' : 'gateway' }),
    agentStarted: (runtime, node, seconds) => starts.started(runtime, node, seconds),
    cluster: () => {
      const lanes = runs.lanes.now();
      return { nodes: starts.list(), lanesActive: lanes.active, lanesWaiting: lanes.waiting };
    },
    walCheckpoint,
    text: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
