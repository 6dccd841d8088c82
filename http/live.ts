import type { Hono } from 'hono';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Signals } from '../core/signals.js';
import type { Channel } from '../channels/channel.js';
import type { WebChannel } from '../channels/web/index.js';
import type { Gateway } from '../gateway/gateway.js';
import { createHttpApp } from './app.js';
import type { WorkQueue } from '../queue/queue.js';
import type { Runtime } from '../queue/runtime/types.js';
import { retryParked } from '../store/admin.js';
import { releaseLimited } from '../store/approvals.js';
import { withActorWhenWritable } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { whenWritable } from '../store/group-commit.js';
import type { History } from '../store/history.js';
import { liveness } from './liveness.js';

/** The live parts the web chat, dashboard and /healthz read; all exist before the app is made. */
export interface WebParts {
  db: Db;
  config: Config;
  log: Logger;
  metrics: Metrics;
  web: WebChannel;
  /** The channels that started: a platform's webhook (`/hooks/<platform>`) is served only once it has. */
  channels: readonly Channel[];
  gateway: Gateway;
  queue: WorkQueue;
  runtime: Runtime;
  history: History | undefined;
  /** A decision on the dashboard fires `decided`, a task paused or resumed there `tasks`. */
  signals: Signals;
}

/**
 * The HTTP app of a running gated (the wiring hands it the live parts; what each route does with them is
 * here, so nothing the app calls at run time is a function of the wiring's): the dashboard's live status (lanes, held chats), its operator actions
 * (stop a run, retry a parked chat, release limited rows: each fires the signal of the stage that takes
 * the rows on) and the liveness checks of /healthz.
 */
export function webApp(p: WebParts): Hono {
  const { db, gateway, queue, signals } = p;
  return createHttpApp({
    db,
    config: p.config,
    log: p.log.child({ part: 'http' }),
    metrics: p.metrics,
    web: p.web,
    sink: (m) => gateway.inbound(m),
    status: () => ({
      lanes: queue.snapshot(),
      held: gateway.pipeline.gate.held().map((h) => ({ ...h, oldest_ms: h.oldest })),
    }),
    routes: gateway.routes,
    history: p.history,
    admin: {
      async stopRun(runId) {
        const live = queue.active().find((l) => l.run_id === runId);
        if (!live) return false;
        return queue.stop({ group: live.group, topic: live.topic }, live.chat_jid ?? undefined);
      },
      // An operator's edit waits for another process's write lock off the event loop.
      async retryChat(chatJid) {
        const n = await whenWritable(db, () => retryParked(db, chatJid, Date.now()));
        if (n > 0) signals.queued.fire();
        return n;
      },
      async releaseChat(chatJid) {
        const n = await withActorWhenWritable(db, 'dashboard', () => releaseLimited(db, chatJid, Date.now()));
        if (n > 0) {
          signals.inbound.fire();
          signals.files.fire();
        }
        return n;
      },
    },
    channels: () => p.channels,
    toolDecided: () => signals.decided.fire(),
    tasksChanged: () => signals.tasks.fire(),
    hooks: (platform) => p.channels.find((c) => c.platform === platform)?.webhook,
    pingRuntime: () => p.runtime.ping(),
    health: () => liveness({ db, loop: gateway.loop, queue, pollMs: p.config.pollMs }),
  });
}
