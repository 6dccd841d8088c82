import { TelegramError, type Telegram } from 'telegraf';
import { telegramHtmlToPlain } from '../../core/telegram-html.js';
import type { DraftOps } from '../channel.js';
import { roomOf, toDeliveryError } from './send.js';

const NOT_MODIFIED = /message is not modified/i;
const CANT_PARSE = /can't parse entities/i;

/**
 * Telegram drafts: a sendMessage, then editMessageText in place, every text as HTML (drafts are formatted
 * like answers, delivery/drafts.ts), so the chat and its notification preview never show raw Markdown.
 * A text Telegram cannot parse goes again as plain text. "Not modified" means the message already shows
 * the text (a retried edit after a crash): success.
 */
export function telegramDrafts(telegram: Telegram): DraftOps {
  const unparsable = (err: unknown) => err instanceof TelegramError && CANT_PARSE.test(err.description);
  const edit = async (chatId: string, id: number, text: string) => {
    const call = (t: string, html: boolean) =>
      telegram.callApi('editMessageText', {
        chat_id: chatId,
        message_id: id,
        text: t,
        ...(html ? { parse_mode: 'HTML' as const } : {}),
      });
    try {
      await call(text, true);
    } catch (err) {
      if (!unparsable(err)) throw err;
      await call(telegramHtmlToPlain(text), false);
    }
  };
  return {
    async open(chatJid, text) {
      const chat_id = roomOf(chatJid);
      try {
        try {
          const sent = await telegram.callApi('sendMessage', { chat_id, text, parse_mode: 'HTML' });
          return String(sent.message_id);
        } catch (err) {
          if (!unparsable(err)) throw err;
          const sent = await telegram.callApi('sendMessage', { chat_id, text: telegramHtmlToPlain(text) });
          return String(sent.message_id);
        }
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async edit(chatJid, id, text) {
      try {
        await edit(roomOf(chatJid), Number(id), text);
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
