import { DiscordAPIError, Routes, type ButtonInteraction, type REST } from 'discord.js';
import { PLATFORMS } from '../../core/platforms.js';
import type { NewInbound } from '../../core/types.js';
import type { ApprovalOps } from '../channel.js';
import { discordJid } from './map.js';
import { roomOf, toDeliveryError } from './send.js';

/**
 * Approval buttons on Discord (docs/CHANNELS.md, "Buttons"): a message with one action row of button
 * components whose `custom_id` is the button's command. A press arrives over the gateway as an
 * INTERACTION_CREATE of a message component and becomes a `button` row from the user Discord names in the
 * interaction (the client cannot choose it); the channel answers it with a deferred update (type 6). The
 * buttons go away with the edit that says who decided.
 */

/** Button styles: Success (green) for approve, Danger (red) for reject, Secondary otherwise. */
const SUCCESS = 3;
const DANGER = 4;
const SECONDARY = 2;
/** Discord error codes meaning the message is gone: Unknown Message, Unknown Channel. */
const GONE = new Set([10008, 10003]);
/** The commands gated's buttons carry; other components (another bot's, a form) are not ours. */
const COMMAND = /^\/(approve|reject) [A-Za-z0-9]{1,16}$/;

/** The ApprovalOps of a Discord bot, over the same REST client the replies use. */
export function discordApprovals(rest: REST): ApprovalOps {
  return {
    async ask(chatJid, text, buttons) {
      const components = [
        {
          type: 1,
          components: buttons.map((b) => ({
            type: 2,
            label: b.label.slice(0, 80),
            custom_id: b.command.slice(0, 100),
            style: styleOf(b.command),
          })),
        },
      ];
      try {
        const body = {
          content: text.slice(0, PLATFORMS.discord.limit),
          components,
          allowed_mentions: { parse: [] },
        };
        const sent = (await rest.post(Routes.channelMessages(roomOf(chatJid)), { body })) as { id: string };
        return sent.id;
      } catch (err) {
        throw toDeliveryError(err);
      }
    },
    async decided(chatJid, platformId, text) {
      try {
        // An empty components list removes the buttons with the same edit.
        const body = {
          content: text.slice(0, PLATFORMS.discord.limit),
          components: [],
          allowed_mentions: { parse: [] },
        };
        await rest.patch(Routes.channelMessage(roomOf(chatJid), platformId), { body });
      } catch (err) {
        if (err instanceof DiscordAPIError && typeof err.code === 'number' && GONE.has(err.code)) return;
        throw toDeliveryError(err);
      }
    },
  };
}

function styleOf(command: string): number {
  if (command.startsWith('/approve')) return SUCCESS;
  if (command.startsWith('/reject')) return DANGER;
  return SECONDARY;
}

/** What a button press carries that the row is made of (a discord.js ButtonInteraction has all of it). */
export type PressedButton = Pick<ButtonInteraction, 'id' | 'customId' | 'channelId' | 'user' | 'member'> & {
  message: { id: string };
};

/**
 * A pressed approval button as an inbound row, or null for a component that is not one of ours. The
 * sender is the user in the interaction (`member.user` in a guild, `user` in a DM), platform_msg_id
 * `ix:<interaction id>`: a replayed event is stored once, a second press is a second row.
 */
export function buttonToInbound(i: PressedButton): NewInbound | null {
  if (!COMMAND.test(i.customId) || !i.channelId) return null;
  const member = i.member as { displayName?: unknown; nick?: unknown } | null;
  const shown =
    (typeof member?.displayName === 'string' ? member.displayName : null) ??
    (typeof member?.nick === 'string' ? member.nick : null) ??
    i.user.globalName ??
    i.user.username;
  return {
    chat_jid: discordJid(i.channelId),
    sender: i.user.id,
    sender_name: shown || null,
    verb: 'button',
    content: i.customId,
    platform_msg_id: `ix:${i.id}`,
    reply_to: i.message.id,
  };
}
