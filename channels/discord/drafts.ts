import { DiscordAPIError, Routes, type REST } from 'discord.js';
import type { DraftOps } from '../channel.js';
import { roomOf, toDeliveryError } from './send.js';

/** Discord's error code for a message that does not exist (any more). */
const UNKNOWN_MESSAGE = 10008;

/**
 * Discord drafts: a message posted once, then edited in place (PATCH), deleted when the answer replaces it.
 * A draft is a reply to the message the turn answers and pings no one else; the final edit carries the
 * answer's Markdown with the mention rules `send` uses.
 * Deleting a message that is already gone succeeds: after a crash the stale draft may be gone already.
 */
export function discordDrafts(rest: REST): DraftOps {
  return {
    async open(chatJid, text, _thread, replyTo) {
      try {
        const body = {
          content: text,
          // Only the user answered is notified (as by an answer sent without a draft): edits notify no one.
          allowed_mentions: { parse: [], replied_user: true },
          ...(replyTo ? { message_reference: { message_id: replyTo, fail_if_not_exists: false } } : {}),
        };
        const sent = (await rest.post(Routes.channelMessages(roomOf(chatJid)), { body })) as { id: string };
        return sent.id;
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async edit(chatJid, id, text, final) {
      const body = {
        content: text,
        allowed_mentions: final ? { parse: ['users'] } : { parse: [] },
      };
      try {
        await rest.patch(Routes.channelMessage(roomOf(chatJid), id), { body });
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async remove(chatJid, id) {
      try {
        await rest.delete(Routes.channelMessage(roomOf(chatJid), id));
      } catch (err) {
        if (err instanceof DiscordAPIError && err.code === UNKNOWN_MESSAGE) return;
        throw toDeliveryError(err);
      }
    },
  };
}
