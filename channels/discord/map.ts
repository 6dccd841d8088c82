import type { Message } from 'discord.js';
import { standInText } from '../../core/platforms.js';
import type { Jid, NewInbound, Verb } from '../../core/types.js';
import { attachmentsOf } from './files.js';

/** The JID of a Discord channel, thread or DM. */
export function discordJid(channelId: string): Jid {
  return `discord:${channelId}`;
}

/**
 * One Discord message as an inbound row, or null for bots (the bot itself included: no reply loops) and
 * system messages. An explicit `<@bot>` is a mention; a reply to one of the bot's messages is a reply. A
 * leading mention is removed (`<@bot> /ping` is a command) and others read `@name`.
 */
export function messageToInbound(m: Message, botId: string, botName: string): NewInbound | null {
  if (m.author.bot || m.system) return null;
  const tag = new RegExp(`<@!?${botId}>`, 'g');
  const mentioned = new RegExp(`<@!?${botId}>`).test(m.content);
  let verb: Verb = 'message';
  if (mentioned) verb = 'mention';
  else if (m.reference?.messageId && m.mentions.repliedUser?.id === botId) verb = 'reply';
  let content = m.content;
  if (mentioned) {
    const stripped = content
      .replace(new RegExp(`^\\s*<@!?${botId}>[\\s,:]*`), '')
      .replace(tag, `@${botName}`);
    content = stripped === '' ? content.replace(tag, `@${botName}`) : stripped;
  }
  if (content === '' && m.attachments.size > 0) {
    content = [...m.attachments.values()].map((a) => standInText({ name: a.name })).join(' ');
  }
  return {
    chat_jid: discordJid(m.channelId),
    sender: m.author.id,
    sender_name: m.member?.displayName ?? m.author.globalName ?? m.author.username,
    verb,
    content,
    platform_msg_id: m.id,
    reply_to: m.reference?.messageId ?? null,
    timestamp: m.createdAt.toISOString(),
    ...(m.attachments.size > 0 ? { attachments: attachmentsOf(m) } : {}),
  };
}
