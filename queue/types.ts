import type { AgentSetup } from './agent-setup.js';
import type { AskBroker } from './asks.js';
import type { ToolCallLog } from './tool-calls.js';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { SessionKey } from '../core/types.js';
import type { Signals } from '../core/signals.js';
import type { AccessSource } from '../store/access.js';
import type { Db } from '../store/db.js';
import type { AgentChoice } from '../store/agents.js';
import type { Runtime } from './runtime/types.js';
import type { MemoryBounds } from '../store/memory.js';
import type { TaskBounds } from '../store/tasks.js';
import type { ActionMetrics } from './actions/apply.js';

/** How a run ended (session_log.result). */
export type { RunResult } from '../core/types.js';
import type { RunResult } from '../core/types.js';

/** What the queue reports to metrics; core/metrics.ts's Metrics satisfies it. */
export interface QueueMetrics {
  /** A run ended: its lifetime (agent start → exit) and the part of it the agent sat idle, in seconds. */
  runFinished(result: RunResult, seconds: number, idleSeconds: number | null): void;
  /** Where the lane gauges read, at each scrape, the lanes with a live agent and those waiting for a slot. */
  lanesFrom(read: () => { active: number; waiting: number }): void;
  /** A row ended `failed` because it could not be handed to an agent (`stage` is 'queue'). */
  rowFailed?(stage: string): void;
}

/** Everything the queue is built from. I/O enters here; nothing real is constructed inside. */
export interface QueueOptions {
  db: Db;
  runtime: Runtime;
  config: Pick<Config, 'groupsDir' | 'maxConcurrent' | 'idleTimeoutMs' | 'runTimeoutMs' | 'maxOutputBytes'> &
    Partial<Pick<Config, 'maxInputBytes' | 'idleAgentsMax' | 'memoryTurnBytes'>>;
  log: Logger;
  /** The clock for rows (ready_at, not_before, session_log); timers use setTimeout. Default Date.now. */
  now?: () => number;
  /**
   * The wake signals (core/signals.ts). The queue listens to `queued` and `attached` (new ready rows) and
   * fires `outbound` after a reply (or error) row commits, `partial` for a draft block, and `working` when
   * a chat's agent started working on its messages (a run started, a follow-up was written) or has
   * answered them (it waits for more, or its run ended). Default: signals of its own.
   */
  signals?: Signals;
  /** Passed to every agent in its first stdin line; never in env, image or mounts. */
  secrets?: Record<string, string>;
  /**
   * GITHUB_WORKTREES=1: a group with no repository whose run serves a GitHub issue or pull request is bound
   * to that repository (cloned from the URL its deliveries named) at the run's start (docs/WORKTREES.md).
   */
  githubWorktrees?: boolean;
  /**
   * Each run's agent, model, configuration and secrets (queue/agent-setup.ts), by group. When given, its
   * secrets replace `secrets`. A throw fails the run like a start that failed.
   */
  setup?: (group: string, topic?: string, choice?: AgentChoice) => AgentSetup;
  metrics?: QueueMetrics;
  /** Uniform [0, 1) source for backoff jitter (tests pin it). Default Math.random. */
  random?: () => number;
  /** Consecutive failures of a (key, chat) before its messages are parked. Default 3. */
  maxFailures?: number;
  /** How long an agent has to answer an interrupt before its turn is waited for as queued. Default 10 s. */
  interruptGraceMs?: number;
  /**
   * The live access rules (store/access.ts): the role the agent is told for a message's sender in its group.
   * Default: every sender a 'member'.
   */
  access?: Pick<AccessSource, 'senderRole'> & Partial<Pick<AccessSource, 'mayReach'>>;
  /**
   * The action types a session key's agent may use (its input's `capabilities`). Default: what the
   * group's registered_groups row allows (none for an unregistered folder).
   */
  capabilities?: (key: SessionKey) => string[];
  /** Settings of agents' actions (docs/PROTOCOL.md). */
  actions?: {
    /** GATED_TZ, for `schedule` cron tasks. Default UTC. */
    tz: string;
    /** GATED_MAX_DELEGATION_DEPTH. Default 3. */
    maxDepth: number;
    /** GATED_MAX_DELEGATION_HOPS: hops of a delegation chain per originating message. Default 20. */
    maxHops?: number;
    /** GATED_TASK_MIN_INTERVAL_MS and GATED_TASKS_PER_GROUP for `schedule`. Default 1 minute and 50. */
    taskBounds?: TaskBounds;
    /** GATED_MEMORY_MAX_FACTS and GATED_MEMORY_MAX_FACT_BYTES for `remember`. Default 1,000 and 2,048. */
    memoryBounds?: MemoryBounds;
    metrics?: ActionMetrics;
  };
  /** Decides agents' tool questions (docs/APPROVALS.md); absent: every tool is allowed. */
  asks?: AskBroker;
  /** The record of tool calls and their receipts (docs/SECURITY.md, "Receipts"); absent: none is kept. */
  calls?: ToolCallLog;
}

/**
 * Where a lane is: `running` (its agent is working), `idle` (its agent waits for a follow-up), `waiting`
 * (ready, no slot free), `backoff` (a failed run's messages wait for their retry time).
 */
export type LaneState = 'running' | 'idle' | 'waiting' | 'backoff';

/** One session lane, for /status, the dashboard and metrics (same shape as http/types.ts). */
export interface LaneInfo {
  group: string;
  topic: string;
  /** The chat whose batch the lane serves (or would serve next). */
  chat_jid: string | null;
  state: LaneState;
  /** Epoch ms when the lane entered this state. */
  since_ms: number;
  /** Epoch ms when its agent started (running and idle lanes). */
  agent_started_ms: number | null;
  /** session_log.id of the live run. */
  run_id: number | null;
  /** Epoch ms of the next retry (backoff lanes). */
  not_before_ms: number | null;
}

/** Facts about one lane, for /ping. */
export interface LaneFacts {
  running: boolean;
  runId: number | null;
  chatJid: string | null;
  /** ISO start time of the live run. */
  startedAt: string | null;
  /** Ready rows of the key (eligible now or in backoff). */
  waiting: number;
  /** When no ready row is eligible yet: the earliest retry time (epoch ms). */
  backoffUntil: number | null;
}

/** The serialized session lanes under a global cap. */
export interface WorkQueue {
  /** New ready rows may exist. Cheap and coalesced: call it as often as you like. */
  wake(): void;
  /**
   * /stop: kills the lane's run (only if it serves `chatJid`, when given); its rows become 'stopped' and are
   * never retried; session_log result 'stopped'. Resolves once the run is finalized; false if nothing ran.
   */
  stop(key: SessionKey, chatJid?: string): Promise<boolean>;
  /**
   * /interrupt without text: asks the lane's agent (if it serves `chatJid` and works on a turn) to stop the
   * turn in progress (docs/PROTOCOL.md). True when the interrupt line was written.
   */
  interrupt(key: SessionKey, chatJid: string): boolean;
  /**
   * /new, after the command dropped the sessions row in its transaction: a running agent of the key gets
   * its stdin closed and its later newSessionId is ignored, so the next run starts fresh.
   */
  resetSession(key: SessionKey): void;
  facts(key: SessionKey): LaneFacts;
  /** The lanes with a live run, from memory (cheap: /healthz asks at every probe). */
  active(): LaneInfo[];
  /** Live runs past their hard timeout (Run.overdueMs), by how long, from memory (/healthz). */
  overdue(): Array<{ runId: number; byMs: number }>;
  /** The live lanes and the waiting ones (a read of the backlog: for the operator, not for probes). */
  snapshot(): { active: LaneInfo[]; waiting: LaneInfo[] };
  /**
   * Startup: rows 'running' of runs that never ended go back to 'ready' (they run again with their
   * messages); those session_log rows get result 'error', 'interrupted: gated restarted'.
   */
  recover(): void;
  /**
   * Stops taking work; running agents get their stdin closed and `graceMs` to finish, then are killed;
   * the unanswered rows of killed runs go back to 'ready'. Idempotent.
   */
  close(graceMs: number): Promise<void>;
}
