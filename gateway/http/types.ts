import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { InboundSink } from '../channels/channel.js';
import type { WebChannel } from '../channels/web.js';
import type { Metrics } from '../metrics.js';
import type { Db } from '../store/db.js';

/**
 * Where a lane is: `running` (its agent is working on a batch), `idle` (its agent is alive, waiting for a
 * follow-up until the idle timeout), `waiting` (ready, no slot free under the global cap), `backoff`
 * (a failed run's messages wait for their retry time).
 */
export type LaneState = 'running' | 'idle' | 'waiting' | 'backoff';

/** One session lane as the queue reports it. */
export interface LaneInfo {
  group: string;
  topic: string;
  /** The chat whose batch the lane serves (or waits for), when there is one. */
  chat_jid: string | null;
  state: LaneState;
  /** Epoch ms when the lane entered this state (the age shown is now minus this). */
  since_ms: number;
  /** Epoch ms when its agent started (running and idle lanes); null otherwise. */
  agent_started_ms: number | null;
  /** session_log.id of the run, when one is live. */
  run_id: number | null;
  /** Epoch ms of the next retry (backoff lanes). */
  not_before_ms?: number | null;
}

/** One chat whose messages the impulse gate holds. */
export interface HeldChat {
  chat_jid: string;
  count: number;
  /** Sum of the held messages' weights. */
  weight: number;
  /** Epoch ms when its oldest held message began waiting. */
  oldest_ms: number;
}

/**
 * What the dashboard needs from the live gateway that the database does not say. The lead's gateway and
 * queue provide it; everything else the dashboard reads straight from SQLite.
 */
export interface StatusSnapshot {
  lanes: { active: LaneInfo[]; waiting: LaneInfo[] };
  held: HeldChat[];
  /** Hits per route id counted in memory and not yet in route_hits (the larger of the two is shown). */
  routeHits: Map<number, number>;
}

/** Everything the HTTP app is built from. I/O enters here; nothing is constructed inside. */
export interface HttpAppOptions {
  db: Db;
  config: Pick<Config, 'adminToken'>;
  log: Logger;
  metrics: Metrics;
  web: WebChannel;
  /** The gateway's sink (insertInbound + wake); the web channel's posts go through it. */
  sink: InboundSink;
  status: () => StatusSnapshot;
  /** Resolves when the agent runtime answers (docker ping; the process runtime resolves at once). */
  pingRuntime?: () => Promise<void>;
  /** The clock (tests). */
  now?: () => number;
}

/** A status snapshot with nothing in it (before the gateway is wired, and in tests). */
export function emptyStatus(): StatusSnapshot {
  return { lanes: { active: [], waiting: [] }, held: [], routeHits: new Map() };
}
