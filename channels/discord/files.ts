import { Routes, type Message, type REST } from 'discord.js';
import { mimeOf, type AttachmentKind, type NewAttachment } from '../../core/files.js';
import type { FetchedFile, SendFile } from '../channel.js';
import { fetchCapped } from '../fetch.js';
import { nonceOf, roomOf, toDeliveryError } from './send.js';

/**
 * Discord files both ways. Inbound: a message's attachments, kept by their CDN URL and fetched after the
 * row is routed. Outbound: one file of a reply as a message attachment (multipart upload).
 */

/** The attachments of a message, in order. */
export function attachmentsOf(m: Message): NewAttachment[] {
  return [...m.attachments.values()].map((a) => {
    // Discord lists text files as `text/plain; charset=utf-8`: the agent gets the type alone.
    const mime = a.contentType?.split(';')[0]!.trim() || mimeOf(a.name);
    return { kind: kindOf(mime), name: a.name, mime, size: a.size, source: a.url };
  });
}

function kindOf(mime: string): AttachmentKind {
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'document';
}

/** Downloads an attachment from its URL (no credentials needed). */
export function fetchDiscordFile(url: string, maxBytes: number): Promise<FetchedFile> {
  return fetchCapped(url, maxBytes);
}

/**
 * Sends one file of an outbound row as an attachment of a new message. Like a text part it carries the
 * part's enforced nonce, so an upload retried after a lost answer or a crash returns the first message.
 */
export async function sendDiscordFile(rest: REST, file: SendFile): Promise<string | null> {
  const room = roomOf(file.chatJid);
  const body = {
    nonce: nonceOf(file),
    enforce_nonce: true,
    allowed_mentions: { parse: [] },
    ...(file.part === 0 && file.replyTo
      ? { message_reference: { message_id: file.replyTo, fail_if_not_exists: false } }
      : {}),
  };
  try {
    const data = file.data;
    const sent = (await rest.post(Routes.channelMessages(room), {
      body,
      files: [{ name: file.name, data, contentType: file.mime }],
    })) as { id: string };
    return sent.id;
  } catch (err) {
    throw toDeliveryError(err);
  }
}
