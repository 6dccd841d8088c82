import { dirname, join, resolve } from 'node:path';
import type { Config } from '../core/config.js';
import { parseJid } from '../core/types.js';
import { coerceError, UsageError } from '../core/errors.js';
import { createLogger, type Logger } from '../core/log.js';
import type { Channel } from '../channels/channel.js';
import { createInbox, type Inbox } from '../channels/inbox.js';
import { createDrafts, type Drafts } from '../delivery/drafts.js';
import { createChannels, startChannels } from '../channels/registry.js';
import { WebChannel } from '../channels/web/index.js';
import { createGateway, type Gateway } from '../gateway/gateway.js';
import { watchCommits } from '../gateway/watch.js';
import { createHttpApp, startHttpServer, type HttpServer } from '../http/app.js';
import type { StatusSnapshot } from '../http/types.js';
import { createMetrics, type Metrics } from '../core/metrics.js';
import { createDelivery, type Delivery } from '../delivery/delivery.js';
import { AccessSource } from '../store/access.js';
import { openDatabase, type Db } from '../store/db.js';
import { RouteSource } from '../store/routes.js';
import { addGroup, listGroups, placementReader } from '../store/groups.js';
import { History } from '../store/history.js';
import { retryParked } from '../store/admin.js';
import { releaseLimited } from '../store/approvals.js';
import { withActor } from '../store/audit.js';
import { createQueue, type WorkQueue } from '../queue/queue.js';
import { createProcessRuntime } from '../queue/runtime/process.js';
import type { Runtime } from '../queue/runtime/types.js';
import { checkReadable, liveness } from './health.js';
import { claimOwner, instanceId } from './owner.js';
import { createTypingKeeper } from './typing.js';

/** How to start gated; everything beyond `config` has a production default. */
export interface StartOptions {
  config: Config;
  log?: Logger;
  /** Replaces the platform channels made from the configuration (the web channel is always added). */
  channels?: Channel[];
  /** Replaces the runtime made from the configuration. */
  runtime?: Runtime;
  /** Serve the web chat, dashboard and /metrics. Default true. */
  http?: boolean;
  /** Register a `demo` group when the database has no groups yet (the embedded default). Default false. */
  demo?: boolean;
  /** Refuse to start when another gated owns the database. Default true. */
  exclusive?: boolean;
  /** How often the per-minute history is written, in ms. Default 60,000 (the benchmark shortens it). */
  historyFlushMs?: number;
}

/** A running gated. `close()` is idempotent and runs every step even when one fails. */
export interface Gated {
  db: Db;
  config: Config;
  log: Logger;
  gateway: Gateway;
  queue: WorkQueue;
  delivery: Delivery;
  web: WebChannel;
  metrics: Metrics;
  /** The per-minute history; undefined when GATED_HISTORY_DAYS is 0. */
  history: History | undefined;
  channels: Channel[];
  /** The web chat's URL when HTTP is on. */
  url: string | undefined;
  close(graceMs?: number): Promise<void>;
}

/**
 * Makes the runtime the configuration names (dockerode is loaded only for the container runtimes). A
 * container engine is checked at start: wrong certificates or a missing image stop the start with one line;
 * an engine that is only unreachable is logged, and runs are retried until it answers.
 */
async function makeRuntime(config: Config, db: Db, log: Logger, metrics: Metrics): Promise<Runtime> {
  if (config.runtime === 'process') return createProcessRuntime({ cmd: config.agentCmd });
  const { default: Docker } = await import('dockerode');
  const { engineOptions, describeAddress, EngineError, nodeEngines } =
    await import('../queue/runtime/engine.js');
  const address = {
    host: config.dockerHost,
    tlsVerify: config.dockerTlsVerify,
    certPath: config.dockerCertPath,
  };
  const docker = new Docker(engineOptions(address));
  const where = describeAddress(address);
  const common = {
    docker,
    image: config.agentImage,
    instanceId: instanceId(db),
    groupsDir: config.groupsDir,
    mountAllow: config.mountAllow,
  };
  let runtime: Runtime;
  if (config.runtime === 'swarm') {
    const { createSwarmRuntime } = await import('../queue/runtime/swarm.js');
    const slog = log.child({ part: 'swarm' });
    const placement = placementReader(db, (group, reason) =>
      slog.warn({ group, reason }, 'registered_groups.placement is not valid JSON; placing anywhere'),
    );
    runtime = createSwarmRuntime({
      ...common,
      where,
      placement,
      nodeEngine: nodeEngines(docker, Docker, address, config.swarmNodePort),
      log: slog,
      onStarted: (node, ms) => metrics.agentStarted('swarm', node, ms / 1000),
    });
  } else {
    const { createDockerRuntime } = await import('../queue/runtime/docker.js');
    runtime = createDockerRuntime({ ...common, where, log: log.child({ part: 'docker' }) });
  }
  try {
    await runtime.ping();
  } catch (err) {
    if (err instanceof EngineError && err.problem !== 'unreachable') throw new UsageError(err.message);
    log.warn({ engine: where, err: (err as Error).message }, 'the engine is not answering; runs wait for it');
  }
  return runtime;
}

/**
 * Starts the whole gateway on `config`: database, runtime, queue, poll loop, delivery, channels and the
 * HTTP server. The only place that wires real I/O together.
 */
export async function startGated(opts: StartOptions): Promise<Gated> {
  const { config } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const db = openDatabase(config.db);
  checkReadable(db, config.db);
  const owner = opts.exclusive === false ? undefined : claimOwner(db);
  const metrics = createMetrics({ processMetrics: true });
  // Uploads wait next to the database (the same disk and owner), outside every group's folder.
  const web = new WebChannel(db, { uploadsDir: join(dirname(resolve(config.db)), 'web-uploads') });
  const history = config.historyDays > 0 ? new History(db, { retainDays: config.historyDays }) : undefined;
  const flushHistory = () => {
    try {
      history?.flush(Date.now());
    } catch (err) {
      log.error({ err: coerceError(err).message }, 'writing the history failed; the next flush retries');
    }
  };
  // The parts the HTTP app reaches are made below; it is served first so that a port that cannot be
  // bound stops the start before any agent runs or any channel connects.
  const late: {
    delivery?: Delivery;
    gateway?: Gateway;
    queue?: WorkQueue;
    runtime?: Runtime;
    inbox?: Inbox;
    started?: Channel[];
    drafts?: Drafts;
  } = {};
  let http: HttpServer | undefined;
  if (opts.http !== false) {
    const status = (): StatusSnapshot => ({
      lanes: late.queue?.snapshot() ?? { active: [], waiting: [] },
      held: late.gateway?.pipeline.gate.held().map((h) => ({ ...h, oldest_ms: h.oldest })) ?? [],
    });
    const app = createHttpApp({
      db,
      config,
      log: log.child({ part: 'http' }),
      metrics,
      web,
      sink: (m) => {
        if (!late.gateway) throw new Error('gated is starting');
        return late.gateway.sink(m);
      },
      status,
      routes: { table: () => late.gateway?.routes.table() ?? new RouteSource(db).table() },
      history,
      admin: {
        async stopRun(runId) {
          const live = late.queue?.snapshot().active.find((l) => l.run_id === runId);
          if (!live || !late.queue) return false;
          return late.queue.stop({ group: live.group, topic: live.topic }, live.chat_jid ?? undefined);
        },
        retryChat(chatJid) {
          const n = retryParked(db, chatJid, Date.now());
          if (n > 0) late.queue?.wake();
          return n;
        },
        releaseChat(chatJid) {
          const n = withActor(db, 'dashboard', () => releaseLimited(db, chatJid, Date.now()));
          if (n > 0) late.gateway?.loop.wake();
          return n;
        },
      },
      // Until the channels have started, a webhook answers 404 and the platform delivers it again later.
      hooks: (platform) => late.started?.find((c) => c.platform === platform)?.webhook,
      pingRuntime: () => late.runtime?.ping() ?? Promise.reject(new Error('starting')),
      health: () =>
        late.gateway && late.queue
          ? liveness({ db, loop: late.gateway.loop, queue: late.queue, pollMs: config.pollMs })
          : { starting: 'gated is starting' },
    });
    try {
      http = await startHttpServer(app, { host: config.httpHost, port: config.httpPort });
    } catch (err) {
      owner?.release();
      db.close();
      throw err;
    }
    log.info({ url: http.url }, 'web chat and dashboard listening');
  }
  if (opts.demo && listGroups(db).length === 0) {
    addGroup(db, config.groupsDir, 'demo', 'Demo');
    log.info('registered the demo group (web chats of web:demo reach it)');
  }

  const channels: Channel[] = [web, ...(opts.channels ?? (await createChannels(config, { db, log })))];
  // Delivery is made once the channels have started (they need the gateway's sink); replies written
  // before that wait. While a chat's agent works, the chat shows typing (only on channels that started).
  const typing = createTypingKeeper(() => late.started ?? [], log.child({ part: 'typing' }));
  let runtime: Runtime;
  try {
    runtime = opts.runtime ?? (await makeRuntime(config, db, log, metrics));
  } catch (err) {
    // A refused engine stops the start: leave the database as a second try will find it.
    await http?.close();
    owner?.release();
    db.close();
    throw err;
  }
  late.runtime = runtime;
  // Each message's sender_role in agent input comes from the live access rules.
  const access = new AccessSource(db, config.admins);
  const queue = createQueue({
    db,
    runtime,
    config,
    log: log.child({ part: 'queue' }),
    onOutbound: () => late.delivery?.wake(),
    onWorking: (chatJid, on) => typing.set(chatJid, on),
    metrics,
    secrets: config.agentSecrets,
    senderRole: (group, row) => access.senderRole(group, row),
    onPartial: (d) =>
      late.drafts?.partial({ chatJid: d.chatJid, runId: d.runId, turn: d.turn, text: d.text }),
    actions: { tz: config.tz, maxDepth: config.maxDelegationDepth, metrics },
  });
  late.queue = queue;
  const gateway = createGateway({
    db,
    config,
    log: log.child({ part: 'gateway' }),
    // Rows the gateway released may carry attachments: the inbox fetches them into the routed folder.
    queue: {
      ...queue,
      wake: () => {
        queue.wake();
        late.inbox?.wake();
      },
    },
    onOutbound: () => late.delivery?.wake(),
    metrics: {
      messageIn: (m) => metrics.messagesIn(parseJid(m.chat_jid).platform, m.verb),
      routed: (t) => metrics.routed(t),
      unrouted: () => metrics.unrouted(),
      pollTick: (s) => metrics.pollTick(s),
      rowFailed: (stage) => metrics.rowFailed(stage),
    },
    // The bot's own username as the platform told it at start (Telegram getMe).
    botName: (platform) =>
      (channels.find((c) => c.platform === platform) as { identity?: { username?: string } } | undefined)
        ?.identity?.username,
  });

  late.gateway = gateway;

  // A platform that cannot start (bad token) is left out of delivery too: its rows wait, pending, for a
  // start that works instead of burning retries.
  const started = await startChannels(channels, gateway.sink, log);
  late.started = started;
  metrics.heldFrom(() => gateway.pipeline.gate.heldCount());
  const drafts = createDrafts({
    db,
    channels: started,
    log: log.child({ part: 'drafts' }),
    mode: (platform) => (config.streamChannels.includes(platform) ? 'stream' : 'batch'),
  });
  late.drafts = drafts;
  // Interrupted runs start again only now: a re-run's first drafts would be lost before the channels
  // (and the drafts that show them) are up.
  queue.recover();
  const outbox = createDelivery({
    db,
    channels: started,
    drafts,
    log: log.child({ part: 'delivery' }),
    metrics: {
      outbound(outcome) {
        metrics.outbound(outcome);
        // Failures leave no timestamped row: the history counts them as they happen.
        if (outcome !== 'delivered') history?.delivery(outcome, Date.now());
      },
    },
  });
  late.delivery = outbox;
  const inbox = createInbox({
    db,
    channels: started,
    groupsDir: config.groupsDir,
    maxBytes: config.maxAttachmentBytes,
    log: log.child({ part: 'inbox' }),
    onSettled: () => queue.wake(),
  });
  late.inbox = inbox;
  gateway.start();
  outbox.start();
  inbox.start();
  // Rows other processes commit wake the loop (and delivery, for replies written elsewhere) at once.
  const commits = watchCommits(
    config.db,
    () => {
      gateway.loop.wake();
      outbox.wake();
    },
    log,
  );

  const historyTimer = history ? setInterval(flushHistory, opts.historyFlushMs ?? 60_000) : undefined;
  historyTimer?.unref();

  let closing: Promise<void> | undefined;
  const close = (graceMs = 10_000): Promise<void> =>
    (closing ??= (async () => {
      const steps: Array<[string, () => unknown]> = [
        ['typing', () => typing.stop()],
        ['channels', () => Promise.all(started.map((c) => c.stop()))],
        ['gateway', () => (commits.close(), gateway.stop())],
        ['queue', () => queue.close(graceMs)],
        ['delivery', () => outbox.stop()],
        ['inbox', () => inbox.stop()],
        ['drafts', () => drafts.stop()],
        ['http', () => http?.close()],
        ['history', () => (clearInterval(historyTimer), flushHistory())],
        ['runtime', () => runtime.close?.()],
        ['owner', () => owner?.release()],
        ['database', () => db.close()],
      ];
      for (const [name, step] of steps) {
        try {
          await step();
        } catch (err) {
          log.error({ step: name, err: coerceError(err).message }, 'shutdown step failed');
        }
      }
    })());

  return {
    db,
    config,
    log,
    gateway,
    queue,
    delivery: outbox,
    web,
    metrics,
    history,
    channels: started,
    url: http?.url,
    close,
  };
}
