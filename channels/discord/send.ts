import { DiscordAPIError, HTTPError, RateLimitError, Routes, type REST } from 'discord.js';
import { coerceError, DeliveryError } from '../../core/errors.js';
import { parseJid, type Jid } from '../../core/types.js';
import type { SendPart } from '../channel.js';

/**
 * The Discord send path: one part of an outbound row through the REST API. Each part carries a nonce that
 * Discord enforces: a second create with the same nonce within minutes returns the message the first one
 * made, so a retry after a lost answer or a crash does not post twice.
 */
export async function sendDiscordPart(rest: REST, part: SendPart): Promise<string | null> {
  const room = roomOf(part.chatJid);
  const body = {
    content: part.text,
    nonce: nonceOf(part),
    enforce_nonce: true,
    // Agent text must never ping @everyone, @here or roles; users it names on purpose may be pinged.
    allowed_mentions: { parse: ['users'], replied_user: true },
    ...(part.part === 0 && part.replyTo
      ? { message_reference: { message_id: part.replyTo, fail_if_not_exists: false } }
      : {}),
  };
  try {
    const sent = (await rest.post(Routes.channelMessages(room), { body })) as { id: string };
    return sent.id;
  } catch (err) {
    throw toDeliveryError(err);
  }
}

/** Puts an emoji reaction of the bot on a message (PUT …/reactions/{emoji}/@me). */
export async function reactDiscord(
  rest: REST,
  chatJid: Jid,
  messageId: string,
  emoji: string,
): Promise<void> {
  if (!/^\d+$/.test(messageId))
    throw new DeliveryError('permanent', `not a discord message id: ${messageId}`);
  try {
    await rest.put(Routes.channelMessageOwnReaction(roomOf(chatJid), messageId, encodeURIComponent(emoji)));
  } catch (err) {
    throw toDeliveryError(err);
  }
}

/**
 * The nonce of one part: row id, part and the row's creation time in base 36, at most 25 characters (the
 * API's limit). The time keeps a reset database that reuses ids from colliding with recent messages.
 */
export function nonceOf(part: Pick<SendPart, 'messageId' | 'part' | 'createdAt'>): string {
  const ms = part.createdAt ? Date.parse(part.createdAt) : Number.NaN;
  const time = Number.isFinite(ms) ? `.${ms.toString(36)}` : '';
  return `${part.messageId.toString(36)}.${part.part.toString(36)}${time}`.slice(0, 25);
}

/** The channel id of a `discord:` JID; anything else is a permanent delivery error. */
export function roomOf(chatJid: Jid): string {
  const { platform, room } = parseJid(chatJid);
  if (platform !== 'discord' || !/^\d+$/.test(room)) {
    throw new DeliveryError('permanent', `not a discord channel: ${chatJid}`);
  }
  return room;
}

/**
 * Sorts a failed REST call: a rate limit waits its retryAfter; 5xx, network errors and 401 (the
 * operator's token, not the reply, is at fault) are transient; other 4xx (403 missing access, 404 unknown
 * channel, 400 invalid body) are permanent.
 */
export function toDeliveryError(err: unknown): DeliveryError {
  if (err instanceof DeliveryError) return err;
  if (err instanceof RateLimitError) {
    const wait = err.retryAfter > 0 ? err.retryAfter : Math.max(err.timeToReset, 1000);
    return new DeliveryError('rate_limited', `429: rate limited on ${err.route}`, wait, 429);
  }
  if (err instanceof DiscordAPIError) {
    const msg = `${err.status} ${err.code}: ${err.message}`;
    if (err.status === 429) return new DeliveryError('rate_limited', msg, undefined, 429);
    if (err.status >= 500 || err.status === 401)
      return new DeliveryError('transient', msg, undefined, err.status);
    return new DeliveryError('permanent', msg, undefined, err.status);
  }
  if (err instanceof HTTPError)
    return new DeliveryError('transient', `${err.status}: ${err.message}`, undefined, err.status);
  return new DeliveryError('transient', coerceError(err).message);
}
