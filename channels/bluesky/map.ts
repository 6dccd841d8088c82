import type { AppBskyNotificationListNotifications } from '@atproto/api';
import type { NewInbound, Verb } from '../../core/types.js';
import { attachmentsOf } from './files.js';
import { blueskyJid } from './refs.js';

/** One entry of app.bsky.notification.listNotifications. */
export type Notification = AppBskyNotificationListNotifications.Notification;

/** Notification reasons gated stores, and the verb each becomes. Other reasons (repost, …) are skipped. */
export const VERB_OF_REASON: Readonly<Record<string, Verb>> = {
  mention: 'mention',
  reply: 'reply',
  quote: 'quote',
  follow: 'follow',
  like: 'reaction',
};

interface Facet {
  index?: { byteStart?: number; byteEnd?: number };
  features?: Array<{ $type?: string; did?: string }>;
}

interface StrongRef {
  uri?: string;
}

interface PostRecord {
  text?: string;
  facets?: Facet[];
  reply?: { parent?: StrongRef };
  embed?: { $type?: string; record?: StrongRef & { record?: StrongRef }; images?: unknown; media?: unknown };
}

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/**
 * Removes a mention of the bot that opens the post, so `@bot /ping` reaches the command layer as `/ping`
 * and `@bot #support help` the prefix layer as `#support help`. Facets index UTF-8 bytes, not characters.
 */
export function stripLeadingMention(text: string, facets: Facet[] | undefined, botDid: string): string {
  const bytes = utf8.encode(text);
  const lead = bytes.length - utf8.encode(text.trimStart()).length;
  for (const f of facets ?? []) {
    const isBot = f.features?.some((x) => x.$type === 'app.bsky.richtext.facet#mention' && x.did === botDid);
    if (isBot && f.index?.byteStart === lead && typeof f.index.byteEnd === 'number') {
      return fromUtf8.decode(bytes.subarray(f.index.byteEnd)).trimStart();
    }
  }
  return text;
}

/** The post a post record answers or quotes, if any: what the inbound row's reply_to holds. */
function referencedUri(record: PostRecord): string | null {
  const embedded = record.embed?.record;
  return record.reply?.parent?.uri ?? embedded?.record?.uri ?? embedded?.uri ?? null;
}

/**
 * Turns one notification into an inbound row, or null for a reason gated does not store. The chat is the
 * author (`bluesky:<did>`), the sender their DID, platform_msg_id the notification's record URI.
 */
export function toInbound(n: Notification, botDid: string): NewInbound | null {
  const verb = VERB_OF_REASON[n.reason];
  if (!verb || n.author.did === botDid) return null;
  const handle = n.author.handle;
  const base = {
    chat_jid: blueskyJid(n.author.did),
    sender: n.author.did,
    sender_name: n.author.displayName?.trim() || handle,
    verb,
    platform_msg_id: n.uri,
    timestamp: isoOf(n.indexedAt),
  };
  switch (n.reason) {
    case 'follow':
      return { ...base, content: `@${handle} followed you`, reply_to: null };
    case 'like':
      return { ...base, content: `@${handle} liked your post`, reply_to: n.reasonSubject ?? null };
    default: {
      const record = n.record as PostRecord;
      const text = stripLeadingMention(record.text ?? '', record.facets, botDid);
      const attachments = attachmentsOf(record.embed, n.author.did);
      return {
        ...base,
        content: text,
        reply_to: referencedUri(record),
        ...(attachments.length > 0 ? { attachments } : {}),
      };
    }
  }
}

function isoOf(when: string): string | undefined {
  const ms = Date.parse(when);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}
