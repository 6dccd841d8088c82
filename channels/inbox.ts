import { join } from 'node:path';
import { backoffDelay } from '../core/backoff.js';
import { groupDirOf } from '../core/group-dir.js';
import type { Signals } from '../core/signals.js';
import { createDrainWorker, type DrainWorker } from '../core/worker.js';
import { coerceError } from '../core/errors.js';
import { FileTooLarge } from '../core/files.js';
import type { Logger } from '../core/log.js';
import { FileRefused, writeInFolder } from '../core/safe-file.js';
import { parseJid } from '../core/types.js';
import {
  dueAttachments,
  nextAttachmentDue,
  retryAttachment,
  finishAttachment,
  type DueAttachment,
} from '../store/attachments.js';
import type { Db } from '../store/db.js';
import type { Channel } from './channel.js';

/** What the inbox downloader needs. */
export interface InboxOptions {
  db: Db;
  channels: Channel[];
  groupsDir: string;
  /** GATED_MAX_ATTACHMENT_BYTES: larger files are not downloaded; the agent gets a note instead. */
  maxBytes: number;
  log: Logger;
  /**
   * The wake signals: the inbox looks when a message with files was routed (`files`) and fires `attached`
   * when a message's attachments are all fetched (or given up) (its row may go to the agent now).
   */
  signals?: Pick<Signals, 'files' | 'attached'>;
  /** Download attempts before an attachment is given up as failed. Default 5. */
  maxAttempts?: number;
  /**
   * How often to look without a wake, in ms (rows another process let in while the commit watcher is off);
   * gated gives it GATED_POLL_MS. Default 1000.
   */
  pollMs?: number;
  now?: () => number;
}

/** The running downloader: wake() looks for due attachments at once, idle() waits out the downloads in flight. */
export type Inbox = DrainWorker;

/**
 * Fills inbound attachments into the folder of the group each message was routed to:
 * `<group>/inbox/<message id>/<seq>-<name>` (the message id keeps two messages' `photo.jpg` apart, the seq
 * two files of one message). It runs beside the gateway, never inside the poll loop or a chat's lane: a slow
 * or failing download delays only its own message, and only until the message's wait runs out.
 *
 * A file is written under a temporary name and renamed (core/safe-file.ts), so an agent never reads half a
 * file, a crash mid-download leaves the row pending, to be fetched again, and a link the agent planted on
 * the way fails the attachment with its reason instead of being written through.
 */
export function createInbox(opts: InboxOptions): Inbox {
  const { db, log } = opts;
  const now = opts.now ?? Date.now;
  const byPlatform = new Map(opts.channels.map((c) => [c.platform, c]));
  const maxAttempts = opts.maxAttempts ?? 5;
  const fetcher: Fetcher = {
    opts,
    byPlatform,
    now,
    maxAttempts,
    attached: () => opts.signals?.attached.fire(),
  };

  /** One pass: every due attachment until none is due; returns the next retry (the interval catches others). */
  return createDrainWorker({
    name: 'inbox',
    log,
    now,
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
    listen: (wake) => opts.signals?.files.on(wake),
    drain: async (stopped) => {
      for (;;) {
        if (stopped()) return undefined;
        const due = dueAttachments(db, now());
        if (due.length === 0) break;
        await Promise.all(due.map((a) => fetchOne(fetcher, a)));
      }
      return nextAttachmentDue(db);
    },
  });
}

/** What fetching one attachment needs. */
interface Fetcher {
  opts: InboxOptions;
  byPlatform: Map<string, Channel>;
  now: () => number;
  maxAttempts: number;
  /** A message's attachments are all finished: its row may go to the agent. */
  attached: () => void;
}

type Outcome = Parameters<typeof finishAttachment>[2];

/** Fetches one due attachment into its group's folder, or records why not (and when to try again). */
async function fetchOne(f: Fetcher, a: DueAttachment): Promise<void> {
  const { db, maxBytes } = f.opts;
  const alog = f.opts.log.child({ message: a.message_id, attachment: a.id });
  const channel = f.byPlatform.get(parseJid(a.chat_jid).platform);
  const finish = (outcome: Outcome) => {
    if (finishAttachment(db, a, outcome)) f.attached();
    const saved = outcome.state === 'saved' ? outcome : undefined;
    channel?.attachmentSettled?.({
      message_id: a.message_id,
      seq: a.seq,
      name: a.name,
      state: outcome.state,
      size: saved?.size ?? a.size,
      mime: saved?.mime ?? a.mime,
    });
  };
  if (!channel?.fetchAttachment) {
    // Rows of a platform this process does not run wait for the process that does.
    if (!channel) return void retryAttachment(db, a.id, f.now() + 60_000, 'channel not running');
    return finish({ state: 'failed', error: `${channel.platform} cannot fetch attachments` });
  }
  if (a.size !== null && a.size > maxBytes) {
    alog.info({ size: a.size, max: maxBytes }, 'attachment too large; not downloaded');
    return finish({ state: 'too_large', error: new FileTooLarge(a.size, maxBytes).message });
  }
  try {
    const file = await channel.fetchAttachment(a.source, maxBytes);
    const rel = join('inbox', String(a.message_id), `${a.seq}-${a.name}`);
    // The folder is the agent's: a link or FIFO it planted on the way is refused, never written through.
    await writeInFolder(groupDirOf(f.opts.groupsDir, a.group_folder), rel, file.data);
    finish({ state: 'saved', path: rel, size: file.data.length, mime: file.mime });
    alog.debug({ path: rel, bytes: file.data.length }, 'attachment saved');
  } catch (err) {
    const outcome = fetchFailed(f, a, err, alog);
    if (outcome) finish(outcome);
  }
}

/** What a failed download means: an outcome for good, or (undefined) a retry after the backoff. */
function fetchFailed(f: Fetcher, a: DueAttachment, err: unknown, alog: Logger): Outcome | undefined {
  if (err instanceof FileTooLarge) {
    alog.info({ max: f.opts.maxBytes }, 'attachment too large; download cut off');
    return { state: 'too_large', error: err.message };
  }
  if (err instanceof FileRefused) {
    alog.warn({ reason: err.reason, path: err.path }, 'attachment refused: unsafe path in the group folder');
    return { state: 'failed', error: `refused: ${err.reason} at ${err.path}` };
  }
  const reason = coerceError(err).message;
  if (a.attempts + 1 >= f.maxAttempts) {
    alog.warn({ attempts: a.attempts + 1, err: reason }, 'attachment download failed for good');
    return { state: 'failed', error: reason };
  }
  const wait = backoffDelay(a.attempts + 1, { baseMs: 500, maxMs: 30_000 });
  alog.info({ attempt: a.attempts + 1, waitMs: wait, err: reason }, 'attachment download failed; retrying');
  retryAttachment(f.opts.db, a.id, f.now() + wait, reason);
  return undefined;
}
