import { ErrorCode, type WebClient } from '@slack/web-api';
import { coerceError, DeliveryError } from '../../core/errors.js';
import { parseJid, type Jid } from '../../core/types.js';
import type { DraftOps, SendFile, SendPart } from '../channel.js';

/**
 * The Slack send path: chat.postMessage for each part, into the thread of the messages it answers (their
 * topic), or, for a message outside a thread, into a new thread under it. Slack has no idempotency key for
 * posts: a crash after Slack accepted a part and before delivery recorded it posts that part again on
 * restart (docs/CHANNELS.md, "Slack").
 */
export async function sendSlackPart(web: WebClient, part: SendPart): Promise<string | null> {
  const thread = threadOf(part);
  try {
    const res = await web.chat.postMessage({
      channel: roomOf(part.chatJid),
      text: part.text,
      ...(thread ? { thread_ts: thread } : {}),
      // Agents' links would otherwise unfold into previews between the parts of one answer.
      unfurl_links: false,
    });
    return res.ts ?? null;
  } catch (err) {
    throw toDeliveryError(err);
  }
}

/** The thread a part goes to: the topic of the answered messages, else the answered message itself. */
function threadOf(p: Pick<SendPart, 'topic' | 'replyTo'>): string | undefined {
  if (p.topic) return p.topic;
  return p.replyTo && /^\d+\.\d+$/.test(p.replyTo) ? p.replyTo : undefined;
}

/**
 * Slack drafts: one chat.postMessage (in the thread the answer goes to), chat.update for every new text,
 * chat.delete when a long answer replaces it by its parts. Drafts come formatted like answers (mrkdwn).
 */
export function slackDrafts(web: WebClient): DraftOps {
  return {
    async open(chatJid, text, thread, replyTo) {
      const ts = threadOf({ topic: thread ?? '', replyTo: replyTo ?? null });
      try {
        const res = await web.chat.postMessage({
          channel: roomOf(chatJid),
          text,
          ...(ts ? { thread_ts: ts } : {}),
        });
        if (!res.ts) throw new DeliveryError('transient', 'chat.postMessage returned no ts');
        return res.ts;
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async edit(chatJid, id, text) {
      try {
        await web.chat.update({ channel: roomOf(chatJid), ts: id, text });
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async remove(chatJid, id) {
      try {
        await web.chat.delete({ channel: roomOf(chatJid), ts: id });
      } catch (err) {
        // Gone already (deleted by hand, or by us before a crash): what was asked is done.
        if (platformError(err) === 'message_not_found') return;
        throw toDeliveryError(err);
      }
    },
  };
}

/**
 * Uploads one file of a reply (files.getUploadURLExternal, the upload, files.completeUploadExternal) and
 * shares it in the answer's thread. Returns the file id.
 */
export async function sendSlackFile(web: WebClient, file: SendFile): Promise<string | null> {
  const thread = threadOf(file);
  try {
    const data = file.data;
    const common = { channel_id: roomOf(file.chatJid), file: data, filename: file.name };
    const res = await web.filesUploadV2(thread ? { ...common, thread_ts: thread } : common);
    const done = res.files as Array<{ files?: Array<{ id?: string }> }> | undefined;
    return done?.[0]?.files?.[0]?.id ?? null;
  } catch (err) {
    throw toDeliveryError(err);
  }
}

/** Puts a reaction (an emoji name such as `thumbsup`, colons optional) on a message. */
export async function reactSlack(web: WebClient, chatJid: Jid, ts: string, emoji: string): Promise<void> {
  const name = emoji.replace(/^:|:$/g, '');
  if (!/^[\w+-]+$/.test(name)) throw new DeliveryError('permanent', `not a slack emoji name: ${emoji}`);
  try {
    await web.reactions.add({ channel: roomOf(chatJid), timestamp: ts, name });
  } catch (err) {
    if (platformError(err) === 'already_reacted') return;
    throw toDeliveryError(err);
  }
}

/** The channel id of a `slack:` JID; anything else is a permanent delivery error. */
export function roomOf(chatJid: Jid): string {
  const { platform, room } = parseJid(chatJid);
  if (platform !== 'slack' || !/^[A-Z0-9]+$/.test(room)) {
    throw new DeliveryError('permanent', `not a slack channel: ${chatJid}`);
  }
  return room;
}

/** The `error` of an `ok:false` answer, if that is what failed. */
export function platformError(err: unknown): string | undefined {
  const e = err as { code?: string; data?: { error?: string } } | null;
  return e?.code === ErrorCode.PlatformError ? e.data?.error : undefined;
}

// `ok:false` errors that a later attempt can get past; every other one (not_in_channel, channel_not_found,
// is_archived, msg_too_long, …) is about this message and permanent.
const TRANSIENT_ERRORS = new Set([
  'ratelimited',
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  'team_added_to_org',
  // The operator's token, not the reply, is at fault: the row waits for a fixed token.
  'invalid_auth',
  'token_revoked',
  'account_inactive',
  'not_authed',
]);

/**
 * Sorts a failed Web API call: 429 waits its Retry-After; HTTP 5xx, network errors and the errors above
 * are transient; other `ok:false` answers are permanent.
 */
export function toDeliveryError(err: unknown): DeliveryError {
  if (err instanceof DeliveryError) return err;
  const e = err as { code?: string; retryAfter?: number; statusCode?: number } | null;
  switch (e?.code) {
    case ErrorCode.RateLimitedError:
      return new DeliveryError('rate_limited', '429: rate limited', (e.retryAfter ?? 1) * 1000, 429);
    case ErrorCode.PlatformError: {
      const code = platformError(err) ?? 'unknown';
      const kind = TRANSIENT_ERRORS.has(code) ? 'transient' : 'permanent';
      return new DeliveryError(kind, `slack: ${code}`);
    }
    case ErrorCode.HTTPError: {
      const status = e.statusCode ?? 0;
      const kind = status >= 500 || status === 408 ? 'transient' : 'permanent';
      return new DeliveryError(kind, `slack: HTTP ${status}`, undefined, status);
    }
    default:
      return new DeliveryError('transient', coerceError(err).message);
  }
}
