import { coerceError, DeliveryError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { parseJid } from '../core/types.js';
import type { Channel } from '../channels/channel.js';
import type { OutboundOutcome } from '../core/metrics.js';
import type { Db } from '../store/db.js';
import { Outbox, type OutboxRow } from './outbox.js';
import { ReplyParts, sendPart } from './files.js';
import type { Drafts } from './drafts.js';
import { abortableSleep, backoffDelay, type BackoffOptions, type Sleep } from '../core/backoff.js';
import { partsFor } from './format.js';
import type { Signals } from '../core/signals.js';
import { createWorker } from '../core/worker.js';
import { endSpan, startDelivery, startPart } from '../core/trace.js';

/** What delivery needs; only `db`, `channels` and `log` are required. */
export interface DeliveryOptions {
  db: Db;
  /** The started channels. Rows of other platforms stay pending for whichever process owns them. */
  channels: Channel[];
  log: Logger;
  /** Restricts this process to some chats (`gated chat` delivers only its local: chat). */
  only?: (chatJid: string) => boolean;
  /** Waits between attempts; injected by tests to observe and control delays. */
  sleep?: Sleep;
  backoff?: BackoffOptions;
  /** How often to look for rows written by other processes, in ms; 0 turns the timer off. Default 1000. */
  pollMs?: number;
  /** Failed attempts after which a row is marked failed even on transient errors. Default: never. */
  maxAttempts?: number;
  metrics?: { outbound(outcome: OutboundOutcome): void };
  /** The chats' streaming drafts: an answer takes over its chat's draft instead of appearing twice. */
  drafts?: Drafts;
  /** Delivery looks at once when `outbound` fires (rows were written). */
  signals?: Pick<Signals, 'outbound'>;
  /** GATED_GROUPS_DIR: the files replies name are read from there when sent; without it they are refused. */
  groupsDir?: string;
  /** The most one file of a reply may hold when it is read for sending. Default 50 MiB. */
  maxFileBytes?: number;
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
  const replyParts = new ReplyParts(opts.db, opts.groupsDir, opts.maxFileBytes ?? 50 * 1024 * 1024);
  const log = opts.log;
  const sleep = opts.sleep ?? abortableSleep;
  const maxAttempts = opts.maxAttempts ?? Number.POSITIVE_INFINITY;
  const byPlatform = new Map(opts.channels.map((c) => [c.platform, c]));
  const workers = new Map<string, Promise<void>>();
  const abort = new AbortController();
  let started = false;
  let stopped = false;

  const channelFor = (chatJid: string): Channel | undefined => {
    if (opts.only && !opts.only(chatJid)) return undefined;
    return byPlatform.get(parseJid(chatJid).platform);
  };

  const spawn = (chatJid: string): void => {
    if (!started || stopped || workers.has(chatJid)) return;
    const channel = channelFor(chatJid);
    if (!channel) return;
    workers.set(chatJid, runChat(chatJid, channel));
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

  async function runChat(chatJid: string, channel: Channel): Promise<void> {
    try {
      // The lookup that finds nothing and the delete in `finally` run in one synchronous step, so a wake
      // arriving later always finds no worker and spawns one: no row is stranded.
      for (;;) {
        if (stopped) return;
        const row = outbox.next(chatJid);
        if (!row) return;
        if (!(await deliverRow(row, channel))) return;
      }
    } catch (err) {
      log.error(
        { chat: chatJid, err: coerceError(err).message },
        'delivery worker failed; next wake retries',
      );
    } finally {
      workers.delete(chatJid);
    }
  }

  /**
   * What a row sends: its text parts and files, or null when there is nothing to send (a reaction the
   * channel cannot put, an empty reply, a row already sent whole), which is settled here.
   */
  function partsOf(row: OutboxRow, channel: Channel, rlog: Logger) {
    // A reaction row is one "part": the emoji, put on the message it answers instead of sent.
    const reaction = row.kind === 'reaction';
    if (reaction && (!channel.react || row.reply_to === null)) {
      const why = channel.react ? 'no message to react to' : `${channel.platform} has no reactions`;
      outbox.markFailed(row.id, why, false);
      opts.metrics?.outbound('failed');
      rlog.warn({ why }, 'reaction not delivered');
      return null;
    }
    const texts = reaction ? [row.content] : partsFor(row.content, channel);
    const files = reaction ? [] : replyParts.files(row.id);
    const total = texts.length + files.length;
    if (total === 0) {
      outbox.markFailed(row.id, 'empty reply: nothing to send', false);
      opts.metrics?.outbound('failed');
      rlog.warn('empty reply marked failed');
      return null;
    }
    if (row.parts_sent >= total) {
      // Every part went out before (an operator set the row back to pending): never send one twice.
      outbox.markSent(row.id);
      rlog.warn({ parts_sent: row.parts_sent }, 'row already fully sent; marked sent');
      return null;
    }
    return { reaction, texts, files, total };
  }

  /** Sends what is left of one row. False when the worker should stop (stopping, or the row moved on). */
  async function deliverRow(row: OutboxRow, channel: Channel): Promise<boolean> {
    const rlog = log.child({ chat: row.chat_jid, row: row.id });
    const what = partsOf(row, channel, rlog);
    if (what === null) return true;
    const { reaction, texts, files, total } = what;
    let attempts = row.delivery_attempts;
    let streak = 0;
    const span = startDelivery(row, total);
    for (let part = row.parts_sent; part < total;) {
      if (stopped) {
        endSpan(span, 'delivery stopping');
        return false;
      }
      const t0 = performance.now();
      const partSpan = startPart(span, part, attempts + 1);
      try {
        const base = {
          messageId: row.id,
          chatJid: row.chat_jid,
          parts: total,
          replyTo: row.reply_to,
          topic: row.topic,
          previousPartId: part === 0 ? null : outbox.previousPartId(row.id, part),
          createdAt: row.created_at,
          kind: row.kind,
        };
        const draft =
          !reaction && part === 0 && opts.drafts
            ? await opts.drafts.takeOver(row.id, row.chat_jid, texts, files.length)
            : null;
        const platformId = reaction
          ? await channel.react!(row.chat_jid, row.reply_to!, row.content).then(() => null)
          : (draft ?? (await sendPart(channel, base, part, texts, files, { parts: replyParts, log: rlog })));
        const last = part === total - 1;
        partSpan?.end();
        if (!outbox.recordPart(row.id, part, platformId, last)) {
          rlog.warn({ partIndex: part }, 'row changed while it was being delivered; leaving it');
          endSpan(span, 'row changed');
          return true;
        }
        if (draft !== null) opts.drafts!.answered(row.chat_jid, draft);
        rlog.debug(
          { partIndex: part, of: total, ms: Math.round(performance.now() - t0), draft: draft !== null },
          'part delivered',
        );
        streak = 0;
        part += 1;
      } catch (thrown) {
        const err = asDeliveryError(thrown);
        endSpan(partSpan, err.message);
        attempts += 1;
        if (err.failure === 'permanent' || attempts >= maxAttempts) {
          endSpan(span, err.message);
          outbox.markFailed(row.id, err.message, true);
          opts.metrics?.outbound('failed');
          rlog.warn(
            { partIndex: part, attempts, failure: err.failure, status: err.status, err: err.message },
            'delivery failed',
          );
          return true;
        }
        outbox.recordAttempt(row.id, err.message);
        opts.metrics?.outbound('retried');
        streak += 1;
        const wait =
          err.failure === 'rate_limited' && err.retryAfterMs !== undefined
            ? err.retryAfterMs
            : backoffDelay(streak, opts.backoff);
        rlog.info(
          { partIndex: part, attempt: attempts, failure: err.failure, status: err.status, waitMs: wait },
          'delivery retry',
        );
        await sleep(wait, abort.signal);
      }
    }
    span?.end();
    opts.metrics?.outbound('delivered');
    rlog.debug({ parts: total }, 'reply delivered');
    return true;
  }

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

/** Anything a channel throws, as a DeliveryError; unknown errors are transient (retrying is the safe side). */
function asDeliveryError(thrown: unknown): DeliveryError {
  if (thrown instanceof DeliveryError) return thrown;
  return new DeliveryError('transient', coerceError(thrown).message);
}
