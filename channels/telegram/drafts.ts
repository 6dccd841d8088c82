import { TelegramError, type Telegram } from 'telegraf';
import { telegramHtmlToPlain } from '../../core/telegram-html.js';
import type { DraftOps } from '../channel.js';
import { roomOf, toDeliveryError } from './send.js';

const NOT_MODIFIED = /message is not modified/i;
const CANT_PARSE = /can't parse entities/i;

/**
 * Telegram drafts: a plain sendMessage, then editMessageText in place; the final edit carries the answer's
 * HTML (plain again if Telegram cannot parse it). "Not modified" means the message already shows the text
 * (a retried edit after a crash): success.
 */
export function telegramDrafts(telegram: Telegram): DraftOps {
  const edit = (chatId: string, id: number, text: string, html: boolean) =>
    telegram.callApi('editMessageText', {
      chat_id: chatId,
      message_id: id,
      text,
      ...(html ? { parse_mode: 'HTML' as const } : {}),
    });
  return {
    async open(chatJid, text) {
      try {
        const sent = await telegram.callApi('sendMessage', { chat_id: roomOf(chatJid), text });
        return String(sent.message_id);
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async edit(chatJid, id, text, final) {
      const chatId = roomOf(chatJid);
      try {
        try {
          await edit(chatId, Number(id), text, final);
        } catch (err) {
          if (!(final && err instanceof TelegramError && CANT_PARSE.test(err.description))) throw err;
          await edit(chatId, Number(id), telegramHtmlToPlain(text), false);
        }
      } catch (err) {
        if (err instanceof TelegramError && NOT_MODIFIED.test(err.description)) return;
        throw toDeliveryError(err);
      }
    },
    async remove(chatJid, id) {
      try {
        await telegram.callApi('deleteMessage', { chat_id: roomOf(chatJid), message_id: Number(id) });
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
  };
}
