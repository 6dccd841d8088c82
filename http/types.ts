import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Channel, InboundSink, WebhookHandler } from '../channels/channel.js';
import type { WebChannel } from '../channels/web/index.js';
import type { Metrics } from '../core/metrics.js';
import type { Db } from '../store/db.js';
import type { RouteSource } from '../store/routes.js';
import type { History } from '../store/history.js';
import type { AdminActions } from './admin.js';
import type { ClientBounds } from './bounds.js';
import type { LaneInfo } from '../queue/types.js';

// Lanes are the queue's vocabulary; the dashboard shows them as the queue reports them.
export type { LaneInfo, LaneState } from '../queue/types.js';

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
}

/** Everything the HTTP app is built from. I/O enters here; nothing is constructed inside. */
export interface HttpAppOptions {
  db: Db;
  /** `admins` (GATED_ADMINS) are shown as owners of every group on the access page. */
  /** `groupsDir` and `maxAttachmentBytes`: the web chat's files (without groupsDir no file is served). */
  /** `clientCaps`: the bounds on SSE streams and uploads (defaults: http/bounds.ts). */
  config: Pick<Config, 'adminToken'> &
    Partial<
      Pick<
        Config,
        | 'tz'
        | 'admins'
        | 'httpHost'
        | 'httpHosts'
        | 'groupsDir'
        | 'maxAttachmentBytes'
        | 'clientCaps'
        | 'runtime'
      >
    >;
  log: Logger;
  metrics: Metrics;
  web: WebChannel;
  /** The gateway's sink (insertInbound + wake); the web channel's posts go through it. */
  sink: InboundSink;
  status: () => StatusSnapshot;
  /** The live routing table; default: a RouteSource of `db` (gated passes the gateway's own). */
  routes?: Pick<RouteSource, 'table'>;
  /** The per-minute history behind the charts (absent: the history endpoint answers 404). */
  history?: History | undefined;
  /** Stop a run, retry a parked chat, release limited rows (the admin token guards them). */
  admin?: AdminActions;
  /** Resolves when the agent runtime answers (docker ping; the process runtime resolves at once). */
  pingRuntime?: () => Promise<void>;
  /** More named checks for /healthz ('ok' or the reason): the poll loop's last tick, a wedged queue. */
  health?: () => Record<string, string>;
  /** The counts behind the client bounds (default: new ones over `config.clientCaps`). */
  bounds?: ClientBounds;
  /** The clock (tests). */
  now?: () => number;
  /** The started channels, for the dashboard's channels panel. */
  channels?: () => readonly Channel[];
  /** A tool approval was decided on the dashboard: the waiting run hears it now (`decided`). */
  toolDecided?: () => void;
  /** A task was paused or resumed on the dashboard: the task worker should look now. */
  tasksChanged?: () => void;
  /** The webhook of a started platform channel (`/hooks/<platform>`), looked up per request. */
  hooks?: (platform: string) => WebhookHandler | undefined;
}

/** A status snapshot with nothing in it (before the gateway is wired, and in tests). */
export function emptyStatus(): StatusSnapshot {
  return { lanes: { active: [], waiting: [] }, held: [] };
}
