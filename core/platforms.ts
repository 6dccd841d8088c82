/**
 * What each platform can do, written once (docs/CHANNELS.md has the same table for readers). The queue
 * reads it to decide whether an agent's `react` can be applied, `gated doctor` to know which platforms it
 * checks and how, the configuration for which platforms stream drafts by default, the dashboard's channels
 * panel for what each started channel can do, and the channel conformance suite (test/channels/conformance.ts) holds every channel to
 * its row: a channel may not offer an ability its row does not name, nor lack one it names. Each channel
 * takes its text format and limit from its row (channels/row-channel.ts), which delivery splits and
 * converts by.
 *
 * A new platform is one row here plus its channel; the places that must then know it (its doctor check,
 * its factory) are typed over `Platform`, so the compiler names them.
 */

import { parseJid } from './types.js';

/** The text dialect a platform reads (core/markdown.ts converts the agent's Markdown into it). */
export type TextFormat = 'markdown' | 'telegram-html' | 'slack-mrkdwn' | 'plain';

/** One platform's abilities. */
export interface PlatformRow {
  /** What the platform reads: the agent's Markdown as written, Telegram's HTML subset, Slack's mrkdwn, or plain text. */
  textFormat: TextFormat;
  /** The longest message the platform accepts, in `limitUnit`s (a reply is split into parts of at most this). */
  limit: number;
  limitUnit: 'chars' | 'graphemes';
  /** The agent's `react` action puts an emoji on the message it answers (the channel's `react`). */
  reactions: boolean;
  /** Tool approvals are asked with buttons (the channel's `approvals`); else as a message naming /approve. */
  buttons: boolean;
  /** An answer in progress is shown as one message edited in place (the channel's `drafts`). */
  drafts: boolean;
  /**
   * Drafts are shown unless configured otherwise: the platform is in GATED_STREAM_CHANNELS's default (a
   * platform whose edits are cheap and quiet; Slack's and GitHub's drafts are there to be switched on).
   */
  stream: boolean;
  /**
   * The most draft posts, edits and deletes a second the drafts make over all chats of one bot: a share of
   * the platform's flood limit that leaves the rest for answers (Telegram takes about 30 messages a second
   * from a bot, edits counted), or null where the platform's limits are not the drafts' to keep (the web
   * chat; Discord and Slack tell each call's limit in its answer).
   */
  draftsPerSecond: number | null;
  /** A typing indicator is shown while the agent works (the channel's `typing`). */
  typing: boolean;
  /**
   * How often a shown typing indicator is sent again while the agent works (null iff no `typing`): the
   * platform's indicator expires by itself (Telegram's after about 5 s, Discord's after about 10 s), and the
   * web chat's renewal tells a page opened mid-turn that the agent works.
   */
  typingRenewMs: number | null;
  /** Replies are sent into files and attachments are fetched (the channel's `sendFile` and `fetchAttachment`). */
  files: boolean;
  /**
   * How a spoken reply (docs/VOICE.md) arrives: as a voice note the app plays in place (Telegram's
   * sendVoice), as an audio file, or as an audio element of the page; null where replies are never spoken.
   * Only platforms with `files` can carry one; the Ogg/Opus file goes through the channel's `sendFile`.
   */
  spoken: 'voice note' | 'audio file' | 'audio element' | null;
  /**
   * The chat's room is a group folder (`web:<folder>`, `local:<folder>`): its messages skip the routing table
   * and go to that folder, and the folder's group (or one above it) may always send there.
   */
  folderRooms: boolean;
  /**
   * The chat's room is an issue or pull request of a repository (`owner/name#N`; the pattern's first group
   * is `owner/name`): a group serving the chat is bound to that repository at its first run, cloned from the
   * URL the platform's deliveries named (docs/WORKTREES.md). Null where a room names no repository.
   */
  repositoryRooms: RegExp | null;
  /** What a thread is on the platform (the `topic` a reply follows), or null where chats have no topics. */
  threads: string | null;
  /**
   * Who assigns a sender's id (docs/ACCESS.md): `unique`, the platform, in a form no other platform shares
   * (a bare GATED_ADMINS entry, without `platform:`, matches it); `overlapping`, the platform, in a form
   * another shares (GitHub's numbers are Telegram's: written `platform:id`); `issued`, gated itself (the web
   * chat: its one admin is whoever presented GATED_ADMIN_TOKEN); `claimed`, the writer (an email address):
   * it counts as the sender only with a `pass` verdict, and a mail domain has one open pairing code at once.
   */
  senderIds: 'unique' | 'overlapping' | 'issued' | 'claimed';
  /** The platform's own standing of a sender that makes it a member of every group (GitHub's), or none. */
  memberRoles: readonly string[];
  /** How `gated doctor` checks the platform's settings, or null where there is nothing remote to check. */
  doctor: string | null;
}

/** Every platform gated has a channel for, in the order doctor reports them. */
export const PLATFORMS = {
  telegram: {
    textFormat: 'telegram-html',
    limit: 4096,
    limitUnit: 'chars',
    reactions: true,
    buttons: true,
    drafts: true,
    stream: true,
    draftsPerSecond: 20,
    typing: true,
    typingRenewMs: 4000,
    files: true,
    spoken: 'voice note',
    folderRooms: false,
    repositoryRooms: null,
    threads: 'forum topics',
    senderIds: 'unique',
    memberRoles: [],
    doctor: 'getMe with TELEGRAM_BOT_TOKEN',
  },
  discord: {
    textFormat: 'markdown',
    limit: 2000,
    limitUnit: 'chars',
    reactions: true,
    buttons: true,
    drafts: true,
    stream: true,
    draftsPerSecond: null,
    typing: true,
    typingRenewMs: 8000,
    files: true,
    spoken: 'audio file',
    folderRooms: false,
    repositoryRooms: null,
    threads: null,
    senderIds: 'unique',
    memberRoles: [],
    doctor: '/users/@me with DISCORD_BOT_TOKEN',
  },
  bluesky: {
    textFormat: 'plain',
    limit: 300,
    limitUnit: 'graphemes',
    reactions: false,
    buttons: false,
    drafts: false,
    stream: false,
    draftsPerSecond: null,
    typing: false,
    typingRenewMs: null,
    files: true,
    spoken: null,
    folderRooms: false,
    repositoryRooms: null,
    threads: 'reply chains (each part under the previous one)',
    senderIds: 'unique',
    memberRoles: [],
    doctor: 'a session opened with BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD',
  },
  slack: {
    textFormat: 'slack-mrkdwn',
    // Slack cuts a message's text at 40,000 characters but advises 4,000 for readability.
    limit: 4000,
    limitUnit: 'chars',
    reactions: true,
    buttons: true,
    drafts: true,
    stream: false,
    draftsPerSecond: null,
    typing: false,
    typingRenewMs: null,
    files: true,
    spoken: 'audio file',
    folderRooms: false,
    repositoryRooms: null,
    threads: 'message threads (thread_ts)',
    senderIds: 'unique',
    memberRoles: [],
    doctor: 'auth.test with SLACK_BOT_TOKEN',
  },
  github: {
    textFormat: 'markdown',
    // A comment body holds 65,536 characters; the rest is room for the part's idempotency marker.
    limit: 65_000,
    limitUnit: 'chars',
    reactions: true,
    buttons: false,
    drafts: true,
    stream: false,
    draftsPerSecond: null,
    typing: false,
    typingRenewMs: null,
    files: false,
    spoken: null,
    folderRooms: false,
    repositoryRooms: /^([A-Za-z0-9-]{1,39}\/[A-Za-z0-9._-]{1,100})#\d+$/,
    threads: null,
    senderIds: 'overlapping',
    memberRoles: ['OWNER', 'MEMBER', 'COLLABORATOR'],
    doctor: '/user with GITHUB_TOKEN, or the App and one installation token',
  },
  email: {
    textFormat: 'markdown',
    // A long mail is fine; past this a reply is split into numbered mails of one thread.
    limit: 32_000,
    limitUnit: 'chars',
    reactions: false,
    buttons: false,
    drafts: false,
    stream: false,
    draftsPerSecond: null,
    typing: false,
    typingRenewMs: null,
    files: true,
    spoken: 'audio file',
    folderRooms: false,
    repositoryRooms: null,
    threads: 'mail threads (a session each, from the first mail of the thread)',
    senderIds: 'claimed',
    memberRoles: [],
    doctor: 'an IMAP login opening EMAIL_MAILBOX and an SMTP login',
  },
  web: {
    textFormat: 'markdown',
    limit: 65_536,
    limitUnit: 'chars',
    reactions: false,
    buttons: false,
    drafts: true,
    stream: true,
    draftsPerSecond: null,
    typing: true,
    typingRenewMs: 4000,
    files: true,
    spoken: 'audio element',
    folderRooms: true,
    repositoryRooms: null,
    threads: 'tabs of the chat page',
    senderIds: 'issued',
    memberRoles: [],
    doctor: null,
  },
  local: {
    textFormat: 'markdown',
    limit: 65_536,
    limitUnit: 'chars',
    reactions: false,
    buttons: false,
    drafts: false,
    stream: false,
    draftsPerSecond: null,
    typing: false,
    typingRenewMs: null,
    files: false,
    spoken: null,
    folderRooms: true,
    repositoryRooms: null,
    threads: null,
    senderIds: 'unique',
    memberRoles: [],
    doctor: null,
  },
} as const satisfies Record<string, PlatformRow>;

/** A platform gated has a channel for. */
export type Platform = keyof typeof PLATFORMS;

/** The platforms whose drafts are shown by default (GATED_STREAM_CHANNELS unset), in the table's order. */
export const STREAM_BY_DEFAULT: readonly Platform[] = (Object.keys(PLATFORMS) as Platform[]).filter(
  (p) => PLATFORMS[p].stream,
);

/**
 * The text a channel stores for a file of a message that has no text, one per file, so that no row is empty:
 * the file's kind where the platform names it (Telegram: `[voice]`), else its name (Discord, Slack:
 * `[attachment: memo.ogg]`). The transcriber drops them before the words (STAND_IN_TEXT): the files are
 * listed to the agent anyway.
 */
export function standInText(file: { kind: string } | { name: string }): string {
  return 'kind' in file ? `[${file.kind}]` : `[attachment: ${file.name}]`;
}

/** standInText's stand-ins at the start of a row's text, of the kinds a message with audio can have. */
export const STAND_IN_TEXT = /^(?:\[(?:voice|audio|video_note|video|document|attachment: [^\]\n]*)\]\s*)+/;

/** A repository a chat's room names (its platform's `repositoryRooms`), or undefined. */
export interface RoomRepository {
  platform: Platform;
  /** `owner/name` as the room writes it. */
  fullName: string;
}

/** The repository the room of `chatJid` names, or undefined for a chat of a platform whose rooms name none. */
export function repositoryOfChat(chatJid: string): RoomRepository | undefined {
  const { platform, room } = parseJid(chatJid);
  const m = platformRow(platform)?.repositoryRooms?.exec(room);
  return m?.[1] ? { platform: platform as Platform, fullName: m[1] } : undefined;
}

/** The row of `platform` (a JID's platform part), or undefined for one gated has no channel for. */
export function platformRow(platform: string): PlatformRow | undefined {
  return Object.hasOwn(PLATFORMS, platform) ? PLATFORMS[platform as Platform] : undefined;
}
