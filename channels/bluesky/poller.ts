import type { Logger } from '../../core/log.js';
import type { Db } from '../../store/db.js';
import { whenWritable } from '../../store/group-commit.js';
import { stateOf, type StateStore } from '../../store/state.js';
import type { InboundSink } from '../channel.js';
import { toInbound, type Notification } from './map.js';
import type { BlueskySession } from './session.js';

/** router_state key of the seen cursor: the indexedAt (ISO-8601) of the newest notification handled. */
export const SEEN_KEY = 'bluesky.seen';

/** Tuning of one poll. */
export interface PollerOptions {
  db: Db;
  session: BlueskySession;
  log: Logger;
  /**
   * How far behind the cursor each poll looks again. The AppView orders notifications by the earlier of
   * the record's createdAt and its indexing time, so a post with a lagging clock can surface just behind
   * the cursor; the (chat_jid, platform_msg_id) dedup keeps the re-read from storing anything twice.
   */
  overlapMs: number;
  /** Notifications per listNotifications page (the API allows up to 100). */
  pageSize?: number;
  /** Most pages one poll reads: bounds the first poll of a busy account. */
  maxPages?: number;
}

/** What one poll did. */
export interface PollResult {
  /** Notifications offered to the sink: newer than the cursor less the overlap, not handled before. */
  seen: number;
  /** Inbound rows written (not counting duplicates and skipped reasons). */
  stored: number;
  /** The cursor after the poll. */
  cursor: string;
}

/**
 * Reads new notifications, stores them oldest first, then moves the cursor in router_state and tells the
 * server what was seen (`updateSeen`). Rows are written before the cursor moves: a crash in between means
 * the next poll reads them again and the dedup drops them, never that one is lost.
 */
export class NotificationPoller {
  private readonly state: StateStore;
  /** URIs this process handled within the overlap window, so a re-read does not offer them again. */
  private readonly handled = new Map<string, number>();
  private lastWritten: string | undefined;

  constructor(private readonly opts: PollerOptions) {
    this.state = stateOf(opts.db);
  }

  /** The persisted cursor, if any. */
  cursor(): string | undefined {
    return this.state.get(SEEN_KEY);
  }

  /**
   * Gives a first start its cursor: the start time. Nothing from before gated's first start is answered
   * (the server's read marker cannot say: the AppView reports only the newest notification unread when
   * the account never marked any as seen). Later starts keep the stored cursor, so nothing that arrived
   * while gated was down is lost.
   */
  ensureCursor(now: number = Date.now()): string {
    const current = this.cursor();
    if (current !== undefined && Number.isFinite(Date.parse(current))) return current;
    const start = new Date(now).toISOString();
    this.state.set(SEEN_KEY, start);
    return start;
  }

  /** One poll. Throws what the API threw (the caller sorts rate limits from other failures). */
  async pollOnce(sink: InboundSink): Promise<PollResult> {
    const { session, log } = this.opts;
    const cursor = this.ensureCursor();
    // A cursor this process did not write (an operator's replay, a restored backup) offers everything
    // after it again; the dedup decides what is new.
    if (cursor !== this.lastWritten) this.handled.clear();
    const fresh = (await this.fetchNew(cursor)).filter((n) => !this.handled.has(n.uri));
    const botDid = session.did;
    let stored = 0;
    let newest = cursor;
    for (const n of fresh.reverse()) {
      const row = toInbound(n, botDid);
      if (row && (await sink(row)) !== null) stored += 1;
      this.handled.set(n.uri, Date.parse(n.indexedAt));
      if (Date.parse(n.indexedAt) > Date.parse(newest)) newest = n.indexedAt;
    }
    const floor = Date.parse(newest) - this.opts.overlapMs;
    for (const [uri, at] of this.handled) if (at <= floor) this.handled.delete(uri);
    this.lastWritten = newest;
    if (newest !== cursor) {
      await whenWritable(this.opts.db, () => this.state.set(SEEN_KEY, newest));
      // Best effort: the server's seen marker only serves other clients and a first start elsewhere.
      await session
        .call((a) => a.app.bsky.notification.updateSeen({ seenAt: newest }))
        .catch((err: Error) => log.warn({ err: err.message }, 'bluesky: updateSeen failed'));
    }
    if (fresh.length) log.debug({ seen: fresh.length, stored, cursor: newest }, 'bluesky: polled');
    return { seen: fresh.length, stored, cursor: newest };
  }

  /** Notifications newer than the cursor less the overlap, newest first as the API lists them. */
  private async fetchNew(cursor: string): Promise<Notification[]> {
    const floor = Date.parse(cursor) - this.opts.overlapMs;
    const pageSize = this.opts.pageSize ?? 50;
    const out: Notification[] = [];
    let page: string | undefined;
    for (let i = 0; i < (this.opts.maxPages ?? 20); i += 1) {
      const res = await this.opts.session.call((a) =>
        // priority: false asks for every notification, not only those from followed accounts, whatever
        // the account's own setting says.
        a.app.bsky.notification.listNotifications({
          limit: pageSize,
          priority: false,
          ...(page ? { cursor: page } : {}),
        }),
      );
      const list = res.data.notifications;
      for (const n of list) {
        if (Date.parse(n.indexedAt) <= floor) return out;
        out.push(n);
      }
      page = res.data.cursor;
      if (!page || list.length < pageSize) break;
    }
    return out;
  }
}
