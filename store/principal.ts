import { parseJid } from '../core/types.js';
import { PLATFORMS, platformRow } from '../core/platforms.js';

/**
 * Who a row's sender is, as access sees it (docs/ACCESS.md, "Who is the sender"): the platform's id, whether
 * anything vouches for it, and the standing the platform itself gives the sender.
 */

/**
 * A sender as access sees it: the chat's platform and the platform's sender id, whether that id is the
 * sender's at all (an email's From is whatever the writer typed until it is authenticated), and the standing
 * the platform itself gives the sender (GitHub's author_association).
 */
export interface Principal {
  platform: string;
  id: string;
  /**
   * Set when nothing vouches for the id: an email whose From was not authenticated, and why. Such a sender
   * is a stranger whatever the rows say (only a `blocked` row still applies), never an admin.
   */
  unauthenticated?: string;
  /** `member` when the platform says the sender is one of the place's people (GitHub: docs/CHANNELS.md). */
  platformRole?: 'member';
}

/** The row's columns a principal is made of. */
export interface SenderColumns {
  chat_jid: string;
  sender: string;
  sender_auth?: string | null;
  platform_role?: string | null;
}

/**
 * Why the row's sender id is not vouched for, or undefined when it is. Email is the one platform whose ids
 * the writer chooses: its rows count as the address only with a `pass` verdict (channels/email/auth.ts), and
 * a row without a verdict (older rows, rows written by hand) is unauthenticated.
 */
export function unauthenticatedWhy(
  platform: string,
  senderAuth: string | null | undefined,
): string | undefined {
  if (platformRow(platform)?.senderIds !== 'claimed') return undefined;
  if (senderAuth?.startsWith('pass')) return undefined;
  return senderAuth ? senderAuth.replace(/^fail:\s*/, '') : 'no authentication verdict';
}

/** The principal of an inbound row: `messages.sender` holds the id, the platform comes from the chat. */
export function principalOf(msg: SenderColumns): Principal {
  const platform = parseJid(msg.chat_jid).platform;
  const p: Principal = { platform, id: msg.sender };
  const why = unauthenticatedWhy(platform, msg.sender_auth);
  if (why !== undefined) p.unauthenticated = why;
  // The platform's own word (GitHub's author_association): the rest are strangers.
  if (msg.platform_role && platformRow(platform)?.memberRoles.includes(msg.platform_role))
    p.platformRole = 'member';
  return p;
}

/**
 * Platforms on which a bare GATED_ADMINS entry (no `platform:`) matches: those whose ids the platform
 * assigns in a form no other platform shares (core/platforms.ts `senderIds: 'unique'`). Never email (an
 * address anyone may write into From), GitHub (its numeric user ids overlap Telegram's) or the web chat
 * (gated issues those ids): write `platform:id` there.
 */
export const BARE_ADMIN_PLATFORMS: ReadonlySet<string> = new Set(
  Object.entries(PLATFORMS)
    .filter(([, row]) => row.senderIds === 'unique')
    .map(([platform]) => platform),
);

/** `platform:sender_id`, the string member globs match. */
export function principalId(p: Principal): string {
  return `${p.platform}:${p.id}`;
}
