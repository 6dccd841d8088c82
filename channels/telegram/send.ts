import { Telegram, TelegramError } from 'telegraf';
import { coerceError, DeliveryError } from '../../core/errors.js';
import { parseJid, type Jid } from '../../core/types.js';
import type { SendPart } from '../channel.js';
import { telegramHtmlToPlain } from '../../core/telegram-html.js';
import { messageIdOf } from './map.js';

/**
 * The Telegram send path: one part of an outbound row through the Bot API. A call without an answer after
 * `timeoutMs` is aborted (a transient failure), so a dead connection never stalls the chat's delivery.
 */
export async function sendTelegramPart(
  telegram: Telegram,
  part: SendPart,
  timeoutMs = 30_000,
): Promise<string | null> {
  const chatId = roomOf(part.chatJid);
  const replyTo = part.part === 0 ? messageIdOf(part.replyTo) : undefined;
  const thread = Number(part.topic);
  const extra = {
    // The General topic (id 1) must not be named when sending.
    ...(Number.isInteger(thread) && thread > 1 ? { message_thread_id: thread } : {}),
    ...(replyTo !== undefined
      ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } }
      : {}),
  };
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const sent = await sendHtmlOrPlain(telegram, chatId, part.text, extra, signal);
    return String(sent.message_id);
  } catch (err) {
    if (signal.aborted) throw new DeliveryError('transient', `telegram: no answer within ${timeoutMs} ms`);
    throw toDeliveryError(err);
  }
}

/**
 * Sends a part written in Telegram's HTML subset; if Telegram refuses to parse it (400 "can't parse
 * entities"), sends the same text again as plain text, so a formatting slip never loses a reply.
 */
async function sendHtmlOrPlain(
  telegram: Telegram,
  chatId: string,
  html: string,
  extra: Omit<Parameters<Telegram['callApi']>[1] & object, 'chat_id' | 'text'>,
  signal: AbortSignal,
) {
  // telegraf types the signal with an AbortController shim; node-fetch takes Node's own.
  const send = (text: string, more: object) =>
    telegram.callApi(
      'sendMessage',
      { chat_id: chatId, text, ...extra, ...more },
      { signal: signal as never },
    );
  try {
    return await send(html, { parse_mode: 'HTML' });
  } catch (err) {
    if (!(err instanceof TelegramError && err.code === 400 && /can't parse entities/i.test(err.description)))
      throw err;
    return send(telegramHtmlToPlain(html), {});
  }
}

/**
 * Puts an emoji reaction on a message (setMessageReaction). Telegram accepts only its own set of reaction
 * emoji: another one is refused with a 400, a permanent failure recorded on the row.
 */
export async function reactTelegram(
  telegram: Telegram,
  chatJid: Jid,
  messageId: string,
  emoji: string,
  timeoutMs = 30_000,
): Promise<void> {
  const id = messageIdOf(messageId);
  if (id === undefined) throw new DeliveryError('permanent', `not a telegram message id: ${messageId}`);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    await telegram.callApi(
      'setMessageReaction',
      { chat_id: roomOf(chatJid), message_id: id, reaction: [{ type: 'emoji', emoji: emoji as never }] },
      { signal: signal as never },
    );
  } catch (err) {
    if (signal.aborted) throw new DeliveryError('transient', `telegram: no answer within ${timeoutMs} ms`);
    throw toDeliveryError(err);
  }
}

/** The chat id of a `telegram:` JID; anything else is a permanent delivery error. */
export function roomOf(chatJid: Jid): string {
  const { platform, room } = parseJid(chatJid);
  if (platform !== 'telegram' || room === '')
    throw new DeliveryError('permanent', `not a telegram chat: ${chatJid}`);
  return room;
}

/**
 * Sorts a failed Bot API call: 429 waits retry_after; 5xx and network errors are transient; 401 is
 * transient too (a revoked token is the operator's to fix, the reply is not at fault); other 4xx (400 bad
 * request, 403 bot kicked or blocked) are permanent.
 */
export function toDeliveryError(err: unknown): DeliveryError {
  if (err instanceof DeliveryError) return err;
  if (err instanceof TelegramError) {
    const code = err.code;
    const msg = `${code}: ${err.description}`;
    if (code === 429)
      return new DeliveryError('rate_limited', msg, (err.parameters?.retry_after ?? 1) * 1000, code);
    if (code >= 500 || code === 401) return new DeliveryError('transient', msg, undefined, code);
    return new DeliveryError('permanent', msg, undefined, code);
  }
  return new DeliveryError('transient', coerceError(err).message);
}
