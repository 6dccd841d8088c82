import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { parseJid } from '../core/types.js';
import type { Channel } from '../channels/channel.js';
import type { OutboundOutcome } from '../core/metrics.js';
import type { Db } from '../store/db.js';
import { Outbox } from './outbox.js';
import { ReplyParts } from './files.js';
import type { Drafts } from './drafts.js';
import { abortableSleep, type BackoffOptions, type Sleep } from '../core/backoff.js';
import type { Signals } from '../core/signals.js';
import { createWorker } from '../core/worker.js';
import { deliverRow, type RowSenderDeps } from './send-row.js';
import type { SpokenReplies } from './spoken.js';

/** What delivery needs; only `db`, `channels` and `log` are required. */
export interface DeliveryOptions {
  db: Db;
  /** The started channels. Rows of other platforms stay pending for whichever process owns them. */
  channels: Channel[];
  log: Logger;
  /** Restricts this process to these chats (`gated chat` delivers only its local: chat). */
  only?: readonly string[];
  /** Waits between attempts; injected by tests to observe and control delays. */
  sleep?: Sleep;
  backoff?: BackoffOptions;
  /** How often to look for rows written by other processes, in ms; 0 turns the timer off. Default 1000. */
  pollMs?: number;
  /** Failed attempts after which a row is marked failed even on transient errors. Default: never. */
  maxAttempts?: number;
  metrics?: { outbound(outcome: OutboundOutcome): void };
  /** The per-minute history (store/history.ts): failures leave no timestamped row, so it counts them here. */
  history?: { delivery(outcome: 'failed' | 'retried', now: number): void };
  /** The chats' streaming drafts: an answer takes over its chat's draft instead of appearing twice. */
  drafts?: Drafts;
  /** Delivery looks at once when `outbound` fires (rows were written). */
  signals?: Pick<Signals, 'outbound'>;
  /** GATED_GROUPS_DIR: the files replies name are read from there when sent; without it they are refused. */
  groupsDir?: string;
  /** The most one file of a reply may hold when it is read for sending. Default 50 MiB. */
  maxFileBytes?: number;
  /** Spoken replies (docs/VOICE.md): a group that speaks gets its replies' text as a voice note too. */
  spoken?: SpokenReplies;
}

/** Delivers outbound rows. */
export interface Delivery {
  /** Delivers what is pending now and starts the poll timer. Idempotent. */
  start(): void;
  /** Looks for new rows at once: of one chat, or of every chat when none is named. */
  wake(chatJid?: string): void;
  /** Resolves when no chat has delivery work in flight (tests; shutdown). */
  idle(): Promise<void>;
  /** Cuts retry waits short, lets a send in flight finish and be recorded, then resolves. */
  stop(): Promise<void>;
}

/**
 * Creates the deliverer. Each chat has at most one worker, which takes the chat's undelivered rows in id
 * order, splits each at its channel's limit and sends the parts not yet recorded in `parts_sent`. A chat
 * waiting on a retry holds only itself: other chats have their own workers.
 *
 * Exactly-once rests on one transaction per accepted part (outbound_parts row + parts_sent) and on the
 * split being deterministic: after a restart the same text splits the same way and sending resumes at
 * parts_sent. What is left is a crash (or a lost answer) after the platform accepted a part and before that
 * transaction committed: each part carries a stable key (row id, part, row time) that Bluesky (record key)
 * and Discord (enforced nonce) use to return the earlier post instead of a second one; on Telegram, which
 * has no such key, that part is sent again (the window is measured in docs/CHANNELS.md).
 */
export function createDelivery(opts: DeliveryOptions): Delivery {
  const outbox = new Outbox(opts.db);
  const log = opts.log;
  const byPlatform = new Map(opts.channels.map((c) => [c.platform, c]));
  const workers = new Map<string, Promise<void>>();
  const abort = new AbortController();
  const sender: RowSenderDeps = {
    outbox,
    replyParts: new ReplyParts(opts.db, opts.groupsDir, opts.maxFileBytes ?? 50 * 1024 * 1024),
    log,
    ...(opts.drafts ? { drafts: opts.drafts } : {}),
    ...(opts.spoken ? { spoken: opts.spoken } : {}),
    ...(opts.metrics || opts.history ? { metrics: outcomes(opts) } : {}),
    ...(opts.backoff ? { backoff: opts.backoff } : {}),
    sleep: opts.sleep ?? abortableSleep,
    signal: abort.signal,
    maxAttempts: opts.maxAttempts ?? Number.POSITIVE_INFINITY,
  };
  let started = false;
  let stopped = false;

  const channelFor = (chatJid: string): Channel | undefined => {
    if (opts.only && !opts.only.includes(chatJid)) return undefined;
    return byPlatform.get(parseJid(chatJid).platform);
  };

  const spawn = (chatJid: string): void => {
    if (!started || stopped || workers.has(chatJid)) return;
    const channel = channelFor(chatJid);
    if (!channel) return;
    // Started after this entry is set, so the sender's own removal (when it finds no row) always follows it.
    const done = () => workers.delete(chatJid);
    workers.set(
      chatJid,
      Promise.resolve().then(() => sendChat(sender, chatJid, channel, done)),
    );
  };

  // The scan is the driver's step (core/worker.ts): the poll interval finds rows other processes wrote,
  // and a failing scan backs off. It only spawns chat workers, so it is synchronous and cheap.
  const scanner = createWorker({
    name: 'outbox scan',
    log,
    step: () => {
      if (!started || stopped) return;
      for (const chat of outbox.pendingChats()) spawn(chat);
    },
    intervalMs: opts.pollMs ?? 1000,
    keepAlive: false,
  });
  const unlisten = opts.signals?.outbound.on(() => scanner.runNow());

  return {
    start() {
      if (started || stopped) return;
      started = true;
      scanner.runNow();
      scanner.start();
    },
    wake(chatJid) {
      if (chatJid === undefined) scanner.runNow();
      else spawn(chatJid);
    },
    async idle() {
      while (workers.size > 0) await Promise.all([...workers.values()]);
    },
    async stop() {
      stopped = true;
      unlisten?.();
      abort.abort();
      await scanner.stop();
      await Promise.all([...workers.values()]);
    },
  };
}

/**
 * A chat's sender: takes the chat's undelivered rows in id order until none is left (or delivery stops).
 * The lookup that finds nothing and `done` (which forgets this sender) run in one synchronous step, so a
 * wake arriving later always finds no sender and spawns one: no row is stranded.
 */
async function sendChat(
  d: RowSenderDeps,
  chatJid: string,
  channel: Channel,
  done: () => void,
): Promise<void> {
  try {
    for (;;) {
      if (d.signal.aborted) return;
      const row = d.outbox.next(chatJid);
      if (!row) return;
      if (!(await deliverRow(d, row, channel))) return;
    }
  } catch (err) {
    d.log.error(
      { chat: chatJid, err: coerceError(err).message },
      'delivery worker failed; next wake retries',
    );
  } finally {
    done();
  }
}

/** Each part's outcome, counted in the metrics and, when not delivered, in the history. */
function outcomes({ metrics, history }: DeliveryOptions): { outbound(outcome: OutboundOutcome): void } {
  return {
    outbound(outcome) {
      metrics?.outbound(outcome);
      if (outcome !== 'delivered') history?.delivery(outcome, Date.now());
    },
  };
}
