/**
 * The Bluesky channel: an app-password session, a notification poller whose cursor lives in router_state,
 * and a poster that answers as threaded replies. JID scheme and verbs: see refs.ts and docs/BLUESKY.md.
 */
import { PLATFORMS } from '../../core/platforms.js';
import type { Logger } from '../../core/log.js';
import { createWorker, type Worker } from '../../core/worker.js';
import type { Db } from '../../store/db.js';
import type { Channel, InboundSink, SendFile, SendPart } from '../channel.js';
import { fetchBlueskyBlob, sendBlueskyImage } from './files.js';
import { NotificationPoller, type PollResult } from './poller.js';
import { POST_LIMIT, ReplyPoster } from './send.js';
import { BlueskySession } from './session.js';
import { pollDelayAfter, toDeliveryError } from './errors.js';

export { SEEN_KEY } from './poller.js';
export { blueskyJid, didOfJid, decodeRef, encodeRef } from './refs.js';
export { toInbound, VERB_OF_REASON } from './map.js';

/** Everything the Bluesky channel needs; credentials come from BLUESKY_* settings. */
export interface BlueskyChannelOptions {
  db: Db;
  /** PDS URL (BLUESKY_SERVICE). */
  service: string;
  /** Handle or DID (BLUESKY_IDENTIFIER). */
  identifier: string;
  /** App password (BLUESKY_APP_PASSWORD); never logged, never stored. */
  password: string;
  log: Logger;
  /** Milliseconds between notification polls. Default 5000. */
  pollMs?: number;
  /** How far behind its cursor each poll looks again (dedup drops repeats). Default 120000. */
  overlapMs?: number;
  /** Longest wait between polls after repeated failures. Default 300000. */
  maxBackoffMs?: number;
  /** A request without an answer after this many ms is aborted and retried. Default 30000. */
  requestTimeoutMs?: number;
}

/** The Bluesky channel, plus a way to poll at once (tests, and a wake after an operator action). */
export interface BlueskyChannel extends Channel {
  /** Polls now (after any poll in flight) and resolves with what it stored. Needs `start` first. */
  pollNow(): Promise<PollResult>;
  /** The bot account's DID, known once started. */
  readonly did: string;
}

/** Builds the Bluesky channel. Nothing touches the network until `start`. */
export function createBlueskyChannel(opts: BlueskyChannelOptions): BlueskyChannel {
  const log = opts.log.child({ channel: 'bluesky' });
  const session = new BlueskySession({
    service: opts.service,
    identifier: opts.identifier,
    password: opts.password,
    log,
    ...(opts.requestTimeoutMs !== undefined ? { timeoutMs: opts.requestTimeoutMs } : {}),
  });
  const poller = new NotificationPoller({ db: opts.db, session, log, overlapMs: opts.overlapMs ?? 120_000 });
  const poster = new ReplyPoster(session);
  const pollMs = opts.pollMs ?? 5000;
  const maxBackoffMs = opts.maxBackoffMs ?? 300_000;

  let sink: InboundSink | undefined;
  let chain: Promise<unknown> = Promise.resolve();

  const pollNow = (): Promise<PollResult> => {
    const s = sink;
    if (!s) return Promise.reject(new Error('bluesky: pollNow before start'));
    const next = chain.then(() => poller.pollOnce(s));
    chain = next.catch(() => undefined);
    return next;
  };

  // The poll loop, made at each start: every pollMs; after a failure, a 429's own reset time, otherwise
  // the interval doubled per failure in a row up to maxBackoffMs.
  let loop: Worker | undefined;
  const makeLoop = () =>
    createWorker({
      name: 'bluesky poll',
      log,
      intervalMs: pollMs,
      step: async () => {
        await pollNow().catch((err: unknown) => Promise.reject(toDeliveryError(err)));
      },
      failureDelay: (err, failures) => pollDelayAfter(toDeliveryError(err), failures, pollMs, maxBackoffMs),
    });

  return {
    platform: 'bluesky',
    limit: POST_LIMIT,
    limitUnit: PLATFORMS.bluesky.limitUnit,
    textFormat: PLATFORMS.bluesky.textFormat,
    get did() {
      return session.did;
    },
    async start(s: InboundSink) {
      if (loop) return;
      poller.ensureCursor();
      try {
        await session.login();
      } catch (err) {
        const e = toDeliveryError(err);
        // Refused credentials do not fix themselves: fail start. An unreachable PDS may come back: the
        // poll loop logs in as soon as it answers.
        if (e.failure === 'permanent') throw new Error(`bluesky: login refused: ${e.message}`);
        log.warn({ err: e.message }, 'bluesky: PDS unreachable at start; the poll loop keeps trying');
      }
      sink = s;
      // The first poll belongs to start, so what arrived while gated was down is stored before start
      // resolves; the loop takes over after one interval (or the wait a failure asks for).
      loop = makeLoop();
      await loop.startNow();
      log.info(
        { did: session.agent.session?.did, pollMs, cursor: poller.cursor() },
        'bluesky: channel started',
      );
    },
    async stop() {
      await loop?.stop();
      loop = undefined;
      await chain;
    },
    send: (part: SendPart) => poster.send(part),
    sendFile: (file: SendFile) => sendBlueskyImage(poster, session, file),
    fetchAttachment: (source: string, maxBytes: number) => fetchBlueskyBlob(session, source, maxBytes),
    pollNow,
  };
}
