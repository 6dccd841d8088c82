import type { Telegram } from 'telegraf';
import { FileTooLarge } from '../../core/files.js';
import type { FetchedFile, SendFile } from '../channel.js';
import { fetchCapped } from '../fetch.js';
import { messageIdOf } from './map.js';
import { roomOf, toDeliveryError } from './send.js';

/**
 * Telegram files both ways. Inbound: attachments (see media.ts) are fetched by file_id through getFile and
 * the Bot API's file URL. Outbound: one file of a reply as sendPhoto, sendVoice or sendDocument (multipart).
 */

/** Downloads a file by its file_id; the URL holds the bot token and never leaves this function. */
export async function fetchTelegramFile(
  telegram: Telegram,
  fileId: string,
  maxBytes: number,
): Promise<FetchedFile> {
  const file = await telegram.getFile(fileId);
  if (file.file_size !== undefined && file.file_size > maxBytes)
    throw new FileTooLarge(file.file_size, maxBytes);
  const url = await telegram.getFileLink(file);
  return fetchCapped(url.toString(), maxBytes);
}

/** Sends one file of an outbound row as a photo, voice note or document. */
export async function sendTelegramFile(telegram: Telegram, file: SendFile): Promise<string | null> {
  const chatId = roomOf(file.chatJid);
  const replyTo = file.part === 0 ? messageIdOf(file.replyTo) : undefined;
  const thread = Number(file.topic);
  const extra = {
    ...(Number.isInteger(thread) && thread > 1 ? { message_thread_id: thread } : {}),
    ...(replyTo !== undefined
      ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } }
      : {}),
  };
  try {
    const input = { source: file.data, filename: file.name };
    const sent =
      file.as === 'photo'
        ? await telegram.sendPhoto(chatId, input, extra)
        : file.as === 'voice'
          ? await telegram.sendVoice(chatId, input, extra)
          : await telegram.sendDocument(chatId, input, extra);
    return String(sent.message_id);
  } catch (err) {
    throw toDeliveryError(err);
  }
}
