import type { AttachmentKind, NewAttachment } from '../../core/files.js';
import { standInText } from '../../core/platforms.js';
import type { Jid, NewInbound, Verb } from '../../core/types.js';

/** The JID of a Slack channel, private channel, group DM or DM. */
export function slackJid(channelId: string): Jid {
  return `slack:${channelId}`;
}

/** Who the bot is, as auth.test told it: its messages are never stored (no reply loops). */
export interface SlackSelf {
  userId: string;
  botId: string;
  /** The bot's user name: other mentions of it read `@name`. */
  name: string;
}

/** A file shared in a message, as the Events API lists it. */
export interface SlackFileRef {
  id: string;
  name?: string;
  mimetype?: string;
  size?: number;
  url_private_download?: string;
  url_private?: string;
}

/** The fields of a `message` or `app_mention` event gated reads. */
export interface SlackMessageEvent {
  type: string;
  channel?: string;
  user?: string;
  bot_id?: string;
  subtype?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
  parent_user_id?: string;
  files?: SlackFileRef[];
  user_profile?: { display_name?: string; real_name?: string };
}

// Subtypes that are a person writing; every other (joins, edits, deletions, bot messages) is not a message.
const USER_SUBTYPES = new Set([undefined, 'file_share', 'thread_broadcast', 'me_message']);

/**
 * One Slack event as an inbound row, or null for anything that is not a person writing (the bot's own
 * messages, other bots, edits, joins). `<@bot>` makes it a mention (a leading one is removed, so
 * `@gated /ping` is a command); a thread reply under one of the bot's messages is a reply. The row's topic
 * is its thread's root `ts` (a message outside a thread roots the thread its answer opens, so its topic is
 * its own `ts`): the answer goes into that thread, and the group decides whether the thread is a session of
 * its own or part of the channel's (registered_groups.threads). `platform_msg_id` is the message `ts`,
 * which Slack keeps across redeliveries: an event retried (`retry_num`) or sent over both Socket Mode and
 * HTTP is stored once, and a mention delivered both as `message` and `app_mention` too.
 */
export function eventToInbound(ev: SlackMessageEvent, self: SlackSelf): NewInbound | null {
  if (ev.type !== 'message' && ev.type !== 'app_mention') return null;
  if (!ev.channel || !ev.ts || !ev.user) return null;
  if (ev.bot_id || ev.user === self.userId || !USER_SUBTYPES.has(ev.subtype)) return null;
  const tag = `<@${self.userId}>`;
  const raw = ev.text ?? '';
  const mentioned = ev.type === 'app_mention' || raw.includes(tag);
  let verb: Verb = 'message';
  if (mentioned) verb = 'mention';
  else if (ev.thread_ts && ev.thread_ts !== ev.ts && ev.parent_user_id === self.userId) verb = 'reply';
  let content = unescapeSlack(raw);
  if (raw.includes(tag)) {
    const stripped = content.startsWith(tag) ? content.slice(tag.length).replace(/^[\s,:]+/, '') : content;
    content = (stripped === '' ? content : stripped).split(tag).join(`@${self.name}`);
  }
  const files = (ev.files ?? []).flatMap(fileOf);
  if (content === '' && files.length > 0) content = files.map((f) => standInText({ name: f.name })).join(' ');
  const inThread = ev.thread_ts !== undefined && ev.thread_ts !== ev.ts;
  return {
    chat_jid: slackJid(ev.channel),
    sender: ev.user,
    sender_name: ev.user_profile?.display_name || ev.user_profile?.real_name || null,
    verb,
    content,
    // The thread the message is in; a message outside one roots the thread its answer opens.
    topic: inThread ? ev.thread_ts! : ev.ts,
    platform_msg_id: ev.ts,
    reply_to: inThread ? ev.thread_ts! : null,
    timestamp: new Date(Math.round(Number(ev.ts) * 1000)).toISOString(),
    ...(files.length > 0 ? { attachments: files } : {}),
  };
}

/** Slack escapes `&`, `<` and `>` in message text; the agent reads the text as the user typed it. */
function unescapeSlack(s: string): string {
  return s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

function fileOf(f: SlackFileRef): NewAttachment[] {
  const url = f.url_private_download ?? f.url_private;
  if (!url) return []; // an external or deleted file: nothing to fetch
  const mime = f.mimetype ?? null;
  return [{ kind: kindOf(mime ?? ''), name: f.name ?? f.id, mime, size: f.size ?? null, source: url }];
}

function kindOf(mime: string): AttachmentKind {
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'document';
}

/** The fields of a `block_actions` interaction (a button pressed) gated reads. */
export interface SlackBlockActions {
  type: string;
  trigger_id?: string;
  user?: { id?: string; name?: string; username?: string };
  channel?: { id?: string };
  container?: { channel_id?: string; message_ts?: string; thread_ts?: string };
  message?: { ts?: string; thread_ts?: string };
  actions?: Array<{ action_id?: string; value?: string; action_ts?: string }>;
}

/** The action ids of gated's approval buttons; other apps' buttons in the same workspace are not ours. */
export const APPROVAL_ACTION = /^gated_approval_\d+$/;
const COMMAND = /^\/(approve|reject) [A-Za-z0-9]{1,16}$/;

/**
 * A pressed approval button as an inbound row (docs/CHANNELS.md, "Buttons"): content is the button's
 * command, sender the presser's user id as Slack signed it, verb `button`, platform_msg_id
 * `ix:<action_ts>` (one per press; a redelivered interaction is stored once). Null for anything else.
 */
export function pressToInbound(p: SlackBlockActions): NewInbound | null {
  if (p.type !== 'block_actions') return null;
  const action = p.actions?.find((a) => APPROVAL_ACTION.test(a.action_id ?? ''));
  const channel = p.channel?.id ?? p.container?.channel_id;
  const press = action?.action_ts ?? p.trigger_id;
  if (!action?.value || !COMMAND.test(action.value) || !channel || !p.user?.id || !press) return null;
  const thread = p.message?.thread_ts ?? p.container?.thread_ts;
  const ts = p.message?.ts ?? p.container?.message_ts;
  return {
    chat_jid: slackJid(channel),
    sender: p.user.id,
    sender_name: p.user.name ?? p.user.username ?? null,
    verb: 'button',
    content: action.value,
    topic: thread && thread !== ts ? thread : '',
    platform_msg_id: `ix:${press}`,
    reply_to: ts ?? null,
  };
}
