import type { NewInbound } from '../../core/types.js';
import type { InboundSink } from '../../gateway/channels/channel.js';
import type { Db } from '../../gateway/store/db.js';
import { insertInbound } from '../../gateway/store/messages.js';

/** A sink that stores with the real insertInbound and lets a test await its n-th call. */
export interface RecordingSink {
  sink: InboundSink;
  /** Every message the channel handed over, stored or deduplicated. */
  readonly seen: NewInbound[];
  /** Resolves once the sink was called at least `n` times. */
  waitCalls(n: number): Promise<void>;
}

/** Makes a RecordingSink writing into `db`. */
export function recordingSink(db: Db): RecordingSink {
  const seen: NewInbound[] = [];
  const waiters: Array<() => void> = [];
  return {
    seen,
    sink: (msg) => {
      const id = insertInbound(db, msg);
      seen.push(msg);
      for (const w of waiters.splice(0)) w();
      return id;
    },
    async waitCalls(n) {
      while (seen.length < n) await new Promise<void>((resolve) => waiters.push(resolve));
    },
  };
}

/** An inbound row as the conformance and channel tests compare it. */
export interface InboundRow {
  chat_jid: string;
  sender: string;
  sender_name: string | null;
  verb: string;
  topic: string;
  platform_msg_id: string | null;
  reply_to: string | null;
  content: string;
}

/** The inbound rows of a database, oldest first. */
export function inboundRows(db: Db): InboundRow[] {
  return db
    .prepare(
      `SELECT chat_jid, sender, sender_name, verb, topic, platform_msg_id, reply_to, content
       FROM messages WHERE is_from_me = 0 ORDER BY id`,
    )
    .all() as InboundRow[];
}
