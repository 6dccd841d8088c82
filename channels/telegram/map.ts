import type { Message, MessageEntity, Update, User } from 'telegraf/types';
import { standInText } from '../../core/platforms.js';
import type { NewInbound, Verb } from '../../core/types.js';
import { attachmentsOf } from './media.js';

/** Who the bot is (from getMe): needed to tell mentions of and replies to the bot. */
export interface TelegramBotIdentity {
  id: number;
  username: string;
}

/** The JID of a Telegram chat. */
export function telegramJid(chatId: number | string): string {
  return `telegram:${chatId}`;
}

/** The update kinds the channel asks for (message_reaction is only sent when asked for by name). */
export const ALLOWED_UPDATES = ['message', 'edited_message', 'message_reaction', 'callback_query'] as const;

const MEDIA_KINDS = [
  'photo',
  'video',
  'animation',
  'audio',
  'voice',
  'video_note',
  'document',
  'sticker',
  'location',
  'contact',
  'poll',
] as const;

export function displayName(u: Pick<User, 'first_name' | 'last_name' | 'username'>): string {
  return [u.first_name, u.last_name].filter(Boolean).join(' ') || u.username || '';
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Text and entities of a message, whether it is a text or a captioned media message. */
function textOf(msg: Message): { text: string; entities: MessageEntity[] } {
  if ('text' in msg) return { text: msg.text, entities: msg.entities ?? [] };
  const caption = 'caption' in msg ? (msg.caption ?? '') : '';
  const entities = 'caption_entities' in msg ? (msg.caption_entities ?? []) : [];
  const kind = MEDIA_KINDS.find((k) => k in msg);
  const label = kind ? standInText({ kind }) : '';
  return { text: [label, caption].filter(Boolean).join(' '), entities };
}

/**
 * True when the message mentions the bot: a `mention` entity naming it, a `text_mention` of its user, or,
 * for text without entities (injected by tools), `@username` standing as a word. `/cmd@bot` is a command,
 * not a mention: the character before `@` rules it out.
 */
function mentionsBot(text: string, entities: MessageEntity[], bot: TelegramBotIdentity): boolean {
  const handle = `@${bot.username}`.toLowerCase();
  for (const e of entities) {
    if (e.type === 'mention' && text.slice(e.offset, e.offset + e.length).toLowerCase() === handle)
      return true;
    if (e.type === 'text_mention' && e.user.id === bot.id) return true;
  }
  if (entities.length > 0) return false;
  return new RegExp(`(^|[^\\w/@])${escapeRe(handle)}(?!\\w)`, 'i').test(text);
}

/**
 * The message this one really replies to. In a forum every topic message carries the topic's creation
 * message as reply_to_message; that is not a reply.
 */
function repliedTo(msg: Message): Message | undefined {
  const r = 'reply_to_message' in msg ? msg.reply_to_message : undefined;
  if (!r) return undefined;
  if (msg.is_topic_message && r.message_id === msg.message_thread_id) return undefined;
  return r;
}

/** The forum topic of a message ('' outside forum topics; General has no thread id). */
function topicOf(msg: Message): string {
  return msg.is_topic_message && msg.message_thread_id !== undefined ? String(msg.message_thread_id) : '';
}

/** Removes a leading `@bot` so `@bot /ping` is a command and `@bot @group hi` a prefix, as on Bluesky. */
function stripLeadingMention(text: string, bot: TelegramBotIdentity): string {
  const stripped = text.replace(new RegExp(`^\\s*@${escapeRe(bot.username)}\\b[\\s,:]*`, 'i'), '');
  return stripped === '' ? text : stripped;
}

function senderOf(msg: Message): { sender: string; sender_name: string | null } {
  // Anonymous group admins and channel posts speak as a chat, not a user.
  if (msg.sender_chat) {
    const title = 'title' in msg.sender_chat ? msg.sender_chat.title : '';
    return { sender: String(msg.sender_chat.id), sender_name: title || null };
  }
  if (msg.from) return { sender: String(msg.from.id), sender_name: displayName(msg.from) || null };
  return { sender: '', sender_name: null };
}

function fromMessage(
  msg: Message,
  bot: TelegramBotIdentity,
  verbOverride?: Verb,
  idSuffix = '',
): NewInbound | null {
  const base = {
    chat_jid: telegramJid(msg.chat.id),
    ...senderOf(msg),
    topic: topicOf(msg),
    timestamp: new Date(msg.date * 1000).toISOString(),
  };
  if ('new_chat_members' in msg) {
    const names = msg.new_chat_members.map(displayName).join(', ');
    return { ...base, verb: 'join', content: names, platform_msg_id: String(msg.message_id) };
  }
  const { text, entities } = textOf(msg);
  if (text === '') return null; // service messages: topic created, title changed, pinned, …
  const replied = repliedTo(msg);
  let verb: Verb = 'message';
  if (mentionsBot(text, entities, bot)) verb = 'mention';
  else if (replied?.from?.id === bot.id) verb = 'reply';
  // An edit carries the same file again: only the original message downloads it.
  const attachments = idSuffix === '' ? attachmentsOf(msg) : [];
  return {
    ...base,
    verb: verbOverride ?? verb,
    content: verb === 'mention' ? stripLeadingMention(text, bot) : text,
    platform_msg_id: `${msg.message_id}${idSuffix}`,
    reply_to: replied ? String(replied.message_id) : null,
    ...(attachments.length > 0 ? { attachments } : {}),
  };
}

/**
 * Turns one Bot API update into an inbound row, or null when it carries nothing for the gateway.
 * platform_msg_id is the message id; an edit adds `:edit:<update_id>` and a reaction `:reaction:<update_id>`,
 * so a redelivered update is stored once while every edit and reaction is kept.
 */
export function updateToInbound(update: Update, bot: TelegramBotIdentity): NewInbound | null {
  if ('message' in update) return fromMessage(update.message, bot);
  if ('edited_message' in update) {
    return fromMessage(update.edited_message, bot, 'edit', `:edit:${update.update_id}`);
  }
  if ('message_reaction' in update) {
    const r = update.message_reaction;
    const emoji = r.new_reaction.map((x) => (x.type === 'emoji' ? x.emoji : '')).join('');
    if (emoji === '') return null; // a reaction taken back
    const who = r.user ?? r.actor_chat;
    const name = r.user
      ? displayName(r.user)
      : r.actor_chat && 'title' in r.actor_chat
        ? r.actor_chat.title
        : '';
    return {
      chat_jid: telegramJid(r.chat.id),
      sender: who ? String(who.id) : '',
      sender_name: name || null,
      verb: 'reaction',
      content: emoji,
      platform_msg_id: `${r.message_id}:reaction:${update.update_id}`,
      reply_to: String(r.message_id),
      timestamp: new Date(r.date * 1000).toISOString(),
    };
  }
  return null;
}

/** The Telegram message id inside a stored platform id (`123`, `123:edit:9`), or undefined. */
export function messageIdOf(platformId: string | null): number | undefined {
  const m = platformId ? /^(\d+)/.exec(platformId) : null;
  return m ? Number(m[1]) : undefined;
}
