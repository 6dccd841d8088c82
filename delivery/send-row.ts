import { backoffDelay, type BackoffOptions, type Sleep } from '../core/backoff.js';
import { coerceError, DeliveryError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { OutboundOutcome } from '../core/metrics.js';
import { endSpan, inSpan, startDelivery, startPart } from '../core/trace.js';
import type { Channel } from '../channels/channel.js';
import type { Drafts } from './drafts.js';
import type { SpokenReplies } from './spoken.js';
import { sendPart, type OutboundFile, type ReplyParts } from './files.js';
import { partsFor } from './format.js';
import type { Outbox, OutboxRow } from './outbox.js';

/**
 * Sending one outbound row, part by part (docs/CHANNELS.md): what a chat's sender in delivery.ts does with
 * each row it takes. A part is recorded in its own transaction the moment the platform accepted it, so a
 * restart resumes at the first part not recorded; a failed part is retried after the one backoff (or the
 * platform's retry-after) until it is sent, turns out permanent, or the attempts run out.
 */

/** What sending a row needs: the outbox, the reply's files, the drafts, and how failures are retried. */
export interface RowSenderDeps {
  outbox: Outbox;
  replyParts: ReplyParts;
  log: Logger;
  drafts?: Drafts;
  /** Spoken replies: a reply of a group that speaks gets its voice note as one more file, before part 0. */
  spoken?: SpokenReplies;
  metrics?: { outbound(outcome: OutboundOutcome): void };
  backoff?: BackoffOptions;
  /** Waits between attempts; aborted by `signal` when delivery stops. */
  sleep: Sleep;
  signal: AbortSignal;
  /** Failed attempts after which a row is marked failed even on transient errors. */
  maxAttempts: number;
}

/** One row's parts: its text parts (or the emoji of a reaction) and then its files. */
interface RowParts {
  reaction: boolean;
  texts: string[];
  files: OutboundFile[];
  total: number;
}

/**
 * Sends what is left of one row. False when the sender should stop (delivery is stopping); true when the
 * row is done with (sent, failed, or changed by someone else).
 */
export function deliverRow(d: RowSenderDeps, row: OutboxRow, channel: Channel): Promise<boolean> {
  // Its lines, from here to the last part, carry the trace of the message it answers (core/trace.ts).
  const span = startDelivery(row);
  return inSpan(span, () => deliverIn(d, row, channel, span));
}

/** deliverRow inside the row's delivery span (`span`, ended here). */
async function deliverIn(
  d: RowSenderDeps,
  row: OutboxRow,
  channel: Channel,
  span: ReturnType<typeof startDelivery>,
): Promise<boolean> {
  const rlog = d.log.child({ chat: row.chat_jid, row: row.id });
  const spoken = (await d.spoken?.prepare(row, channel)) === true;
  const parts = partsOf(d, row, channel, spoken);
  if ('why' in parts) {
    endSpan(span, parts.why);
    d.outbox.markFailed(row.id, parts.why, false);
    d.metrics?.outbound('failed');
    if (parts.reaction) rlog.warn({ why: parts.why }, 'reaction not delivered');
    else rlog.warn('empty reply marked failed');
    return true;
  }
  span?.setAttribute('gated.parts', parts.total);
  if (row.parts_sent >= parts.total) {
    // Every part went out before (an operator set the row back to pending): never send one twice.
    d.outbox.markSent(row.id);
    rlog.warn({ parts_sent: row.parts_sent }, 'row already fully sent; marked sent');
    span?.end();
    return true;
  }
  let attempts = row.delivery_attempts;
  let streak = 0;
  for (let part = row.parts_sent; part < parts.total;) {
    if (d.signal.aborted) {
      endSpan(span, 'delivery stopping');
      return false;
    }
    const partSpan = startPart(span, part, attempts + 1);
    try {
      if (!(await inSpan(partSpan, () => sendOne(d, row, channel, parts, part, rlog, partSpan)))) {
        endSpan(span, 'row changed');
        return true;
      }
      streak = 0;
      part += 1;
    } catch (thrown) {
      const err = asDeliveryError(thrown);
      endSpan(partSpan, err.message);
      attempts += 1;
      if (err.failure === 'permanent' || attempts >= d.maxAttempts) {
        endSpan(span, err.message);
        d.outbox.markFailed(row.id, err.message, true);
        d.metrics?.outbound('failed');
        rlog.warn(
          { partIndex: part, attempts, failure: err.failure, status: err.status, err: err.message },
          'delivery failed',
        );
        return true;
      }
      streak += 1;
      await retryLater(d, row, err, { part, attempts, streak }, rlog);
    }
  }
  span?.end();
  d.metrics?.outbound('delivered');
  rlog.debug({ parts: parts.total }, 'reply delivered');
  return true;
}

/** The parts of a row, or why it cannot be sent at all (it is then marked failed, never retried). */
function partsOf(
  d: RowSenderDeps,
  row: OutboxRow,
  channel: Channel,
  spoken: boolean,
): RowParts | { why: string; reaction: boolean } {
  // A reaction row is one "part": the emoji, put on the message it answers instead of sent.
  const reaction = row.kind === 'reaction';
  if (reaction && (!channel.react || row.reply_to === null)) {
    const why = channel.react ? 'no message to react to' : `${channel.platform} has no reactions`;
    return { why, reaction };
  }
  const texts = reaction ? [row.content] : partsFor(row.content, channel);
  // Its files as `next` saw them, and the voice note just added (delivery/spoken.ts) if any.
  const files = reaction || (row.has_files === 0 && !spoken) ? [] : d.replyParts.files(row.id);
  const total = texts.length + files.length;
  if (total === 0) return { why: 'empty reply: nothing to send', reaction };
  return { reaction, texts, files, total };
}

/**
 * Sends part `part` (part 0 of a reply may take over the chat's draft instead) and records it; `partSpan`
 * (the part's trace span) ends once the platform took it. False when the row changed while it was being
 * delivered (it is left to whoever changed it).
 */
async function sendOne(
  d: RowSenderDeps,
  row: OutboxRow,
  channel: Channel,
  p: RowParts,
  part: number,
  rlog: Logger,
  partSpan: ReturnType<typeof startPart>,
): Promise<boolean> {
  const t0 = performance.now();
  // The row (and the draft it may take over) must be committed before the platform sees it: with group
  // commit it may still be in the turn's open group (docs/QUEUE.md "Group commit").
  const pending = d.outbox.committed();
  if (pending) await pending;
  const base = {
    messageId: row.id,
    chatJid: row.chat_jid,
    parts: p.total,
    replyTo: row.reply_to,
    topic: row.topic,
    previousPartId: part === 0 ? null : d.outbox.previousPartId(row.id, part),
    createdAt: row.created_at,
    kind: row.kind,
  };
  const draft =
    !p.reaction && part === 0 && d.drafts
      ? await d.drafts.takeOver(row.id, row.chat_jid, p.texts, p.files.length)
      : null;
  const platformId = p.reaction
    ? await channel.react!(row.chat_jid, row.reply_to!, row.content).then(() => null)
    : (draft ?? (await sendPart(channel, base, part, p.texts, p.files, { parts: d.replyParts, log: rlog })));
  partSpan?.end();
  // No await between the lock had and the write: the part's record joins the group just opened.
  await d.outbox.writable();
  if (!d.outbox.recordPart(row.id, part, platformId, part === p.total - 1)) {
    rlog.warn({ partIndex: part }, 'row changed while it was being delivered; leaving it');
    return false;
  }
  if (draft !== null) d.drafts!.answered(row.chat_jid, draft);
  rlog.debug(
    { partIndex: part, of: p.total, ms: Math.round(performance.now() - t0), draft: draft !== null },
    'part delivered',
  );
  return true;
}

/** Records a failed attempt and waits: the platform's retry-after when it named one, else the one backoff. */
async function retryLater(
  d: RowSenderDeps,
  row: OutboxRow,
  err: DeliveryError,
  at: { part: number; attempts: number; streak: number },
  rlog: Logger,
): Promise<void> {
  d.outbox.recordAttempt(row.id, err.message);
  d.metrics?.outbound('retried');
  const wait =
    err.failure === 'rate_limited' && err.retryAfterMs !== undefined
      ? err.retryAfterMs
      : backoffDelay(at.streak, d.backoff);
  rlog.info(
    { partIndex: at.part, attempt: at.attempts, failure: err.failure, status: err.status, waitMs: wait },
    'delivery retry',
  );
  await d.sleep(wait, d.signal);
}

/** Anything a channel throws, as a DeliveryError; unknown errors are transient (retrying is the safe side). */
function asDeliveryError(thrown: unknown): DeliveryError {
  if (thrown instanceof DeliveryError) return thrown;
  return new DeliveryError('transient', coerceError(thrown).message);
}
