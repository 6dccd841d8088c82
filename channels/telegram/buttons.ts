import { TelegramError, type Telegram } from 'telegraf';
import type { Update } from 'telegraf/types';
import type { NewInbound } from '../../core/types.js';
import type { ApprovalOps } from '../channel.js';
import { displayName, telegramJid } from './map.js';
import { roomOf, toDeliveryError } from './send.js';

/**
 * Approval buttons on Telegram (docs/CHANNELS.md, "Buttons"): an inline keyboard whose callback data is
 * the button's command; a press arrives as a `callback_query` update and becomes a `button` row from the
 * user Telegram names as `from` (the client cannot choose it). The keyboard goes away with the edit that
 * says who decided.
 */

/** "Not modified" (the edit was already made) and "not found" (the message is gone) count as done. */
const ALREADY = /message is not modified|message to edit not found/i;

/** The ApprovalOps of a Telegram bot. */
export function telegramApprovals(telegram: Telegram): ApprovalOps {
  return {
    async ask(chatJid, text, buttons, thread) {
      const topic = Number(thread);
      try {
        const sent = await telegram.callApi('sendMessage', {
          chat_id: roomOf(chatJid),
          // Telegram's HTML subset, as delivery writes answers (the input in a <pre> block).
          text,
          parse_mode: 'HTML',
          // The General topic (id 1) must not be named when sending.
          ...(Number.isInteger(topic) && topic > 1 ? { message_thread_id: topic } : {}),
          reply_markup: {
            inline_keyboard: [buttons.map((b) => ({ text: b.label, callback_data: b.command }))],
          },
        });
        return String(sent.message_id);
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async decided(chatJid, platformId, text) {
      try {
        // No reply_markup: the keyboard is removed with the same edit.
        await telegram.callApi('editMessageText', {
          chat_id: roomOf(chatJid),
          message_id: Number(platformId),
          text,
          parse_mode: 'HTML',
        });
      } catch (err) {
        if (err instanceof TelegramError && ALREADY.test(err.description)) return;
        throw toDeliveryError(err);
      }
    },
  };
}

/** A pressed button as an inbound row, or null for an update that is not a press of ours. */
export function callbackToInbound(update: Update): NewInbound | null {
  if (!('callback_query' in update)) return null;
  const q = update.callback_query;
  if (!('data' in q) || typeof q.data !== 'string' || !q.message) return null;
  const msg = q.message;
  const thread =
    'is_topic_message' in msg && msg.is_topic_message && msg.message_thread_id !== undefined
      ? String(msg.message_thread_id)
      : '';
  return {
    chat_jid: telegramJid(msg.chat.id),
    sender: String(q.from.id),
    sender_name: displayName(q.from) || null,
    verb: 'button',
    content: q.data,
    topic: thread,
    // A press has its own id: a redelivered update is stored once, a second press is a second row.
    platform_msg_id: `cb:${q.id}`,
    reply_to: String(msg.message_id),
  };
}
