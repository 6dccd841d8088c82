/**
 * The vocabulary of gated, written once.
 *
 * Terminology
 * - JID: `platform:room`, the identity of one chat (`telegram:-5075870332`, `web:demo`). The platform is the
 *   text before the first `:`, the room the text after it.
 * - Group: a registered agent workspace named by its folder path (`krons/content`); its files live in its
 *   own folder directly under GATED_GROUPS_DIR (`krons+content`, core/group-dir.ts), never inside its
 *   parent's: the tree of groups is their folder names, not the disk.
 * - Topic: a named session inside a group (`#support` in chat, `support` when stored); the default is ''.
 * - SessionKey: (group folder, topic). At most one agent run per session key at a time.
 * - Verb: the kind of an inbound event (`message`, `mention`, `reply`, `reaction`, `follow`, …).
 * - Route: one row of the `routes` table: `match` (key=glob pairs) → `target`.
 * - RouteTable: all routes compiled once per table version; answers "which target takes these fields".
 * - Step: one of the six stages every inbound row goes through in order (STEPS in gateway/steps.ts:
 *   sticky, command, prefix, route, access, gate); a step either handles the row or passes it on, and the
 *   later ones read what earlier ones chose (a prefix's group is the route's target).
 * - Impulse gate: holds a chat's messages until their weights reach a threshold or the oldest has waited
 *   the maximum hold.
 * - Lane: the serialized queue of one session key; at most GATED_MAX_CONCURRENT lanes run at once.
 * - Batch: the ready messages of one session key and one chat, handed to one run, oldest first.
 * - Run: one agent process or container serving a batch and its follow-ups; a row of session_log.
 * - Follow-up: a message written to a running agent's stdin instead of starting a new run.
 * - Runtime: how agents are started (`process`, `docker` or `swarm`).
 * - Channel: a platform adapter: turns platform events into inbound rows and delivers outbound rows.
 * - Outbox: outbound rows (is_from_me = 1) that are not delivered yet.
 * - Draft: the text of a turn an agent is still writing (a `partial` block), shown in the chat as one
 *   message edited in place and never stored; the answer takes it over.
 * - Passage: one inbound message on its way through the steps (gateway/layers/types.ts).
 * - Settle: what the end of a run does to its rows (queue/settle.ts: done, ready again, parked, stopped).
 *   Nothing else is called settling.
 * - Signal: a typed wake (core/signals.ts) fired by the stage that made work, heard by the one that does it.
 */

import type { NewAttachment } from './files.js';

/** How a finished run ended (session_log.result). */
export type RunResult = 'ok' | 'error' | 'timeout' | 'stopped';

/** `platform:room`. */
export type Jid = string;

/** The kind of an inbound event. Adapters fill it in; anything else is allowed too. */
export type Verb =
  | 'message'
  | 'mention'
  | 'reply'
  | 'reaction'
  | 'typing'
  | 'join'
  | 'edit'
  | 'delete'
  | 'follow'
  | 'quote'
  /** A pressed approval button (§18): content is the button's command, docs/CHANNELS.md "Buttons". */
  | 'button'
  /** The platform closed the chat's issue, pull request or thread: its topic's worktree goes (docs/WORKTREES.md). */
  | 'close'
  | (string & {});

/** What an adapter (or `gated send`) writes for one inbound event. */
export interface NewInbound {
  chat_jid: Jid;
  sender: string;
  content: string;
  sender_name?: string | null;
  verb?: Verb;
  topic?: string;
  platform_msg_id?: string | null;
  reply_to?: string | null;
  /** UTC ISO-8601 with milliseconds; defaulted by the database when absent. */
  timestamp?: string;
  /** Photos, documents, voice notes… to download into the group's folder once the row is routed. */
  attachments?: NewAttachment[];
  /**
   * Stored for the record but never routed or answered: the row starts in state `dropped` with this
   * reason as its error (an email auto-reply or bounce, which an answer could turn into a mail loop).
   */
  withheld?: string;
  /**
   * Email only: whether the sender's address was authenticated (`pass: …`, saying how) or not (`fail: …`,
   * saying why), docs/ACCESS.md "Who is the sender". An email row without `pass` is a stranger's.
   */
  sender_auth?: string;
  /** What the platform itself says of the sender's standing: GitHub's `author_association` (`COLLABORATOR`). */
  platform_role?: string;
}

/** One row of `messages` as the pipeline sees it. */
export interface Message {
  id: number;
  chat_jid: Jid;
  sender: string;
  sender_name: string | null;
  content: string;
  verb: Verb;
  topic: string;
  platform_msg_id: string | null;
  reply_to: string | null;
  timestamp: string;
  is_from_me: number;
  /** NewInbound.sender_auth as stored (read by the poll loop; absent where a row is made by hand). */
  sender_auth?: string | null;
  /** NewInbound.platform_role as stored. */
  platform_role?: string | null;
  /** 1: the row came with audio (docs/VOICE.md); read by the poll loop. */
  audio?: number | null;
  /** 1: content is a transcript; 0: a note that the audio was not transcribed; NULL: neither. */
  transcript?: number | null;
}

/** (group folder, topic): the unit of serialization and of the agent's session. */
export interface SessionKey {
  readonly group: string;
  readonly topic: string;
}

/**
 * What a new message does while its session's agent works on a turn (registered_groups.busy, docs/PROTOCOL.md):
 * `queue` waits for the next turn, `steer` is shown to the model inside the turn in progress, `interrupt`
 * stops the turn in progress first.
 */
export type BusyMode = 'queue' | 'steer' | 'interrupt';

/** The busy mode a stored value names; anything unknown (a typo written with sqlite3) is `queue`. */
export function busyModeOf(value: unknown): BusyMode {
  return value === 'steer' || value === 'interrupt' ? value : 'queue';
}

/**
 * What a platform thread is to a group (registered_groups.threads, docs/CHANNELS.md): `topics` makes each thread
 * (a Slack thread, a Telegram forum topic, a mail thread) a session of its own; `replies` keeps the chat one
 * session, and answers still go into the thread of the message they answer.
 */
export type ThreadMode = 'topics' | 'replies';

/** The thread mode a stored value names; anything unknown is `topics`. */
export function threadModeOf(value: unknown): ThreadMode {
  return value === 'replies' ? 'replies' : 'topics';
}

/** A stable string for a session key, for maps and logs: `krons/content#support`. */
export function sessionKeyId(key: SessionKey): string {
  return key.topic === '' ? key.group : `${key.group}#${key.topic}`;
}

/** A platform's name as a JID starts with it: lower case, a letter first, at most 32 characters. */
export const PLATFORM_RE = /^[a-z][a-z0-9_-]{0,31}$/;

/** Splits a JID at its first `:`. A JID without `:` has the empty platform. */
export function parseJid(jid: Jid): { platform: string; room: string } {
  const i = jid.indexOf(':');
  return i < 0 ? { platform: '', room: jid } : { platform: jid.slice(0, i), room: jid.slice(i + 1) };
}

/** The fields a route's `match` can test. */
export interface RouteFields {
  platform: string;
  room: string;
  chat_jid: string;
  sender: string;
  verb: string;
}

/** Builds the route fields of a message. */
export function routeFields(msg: Pick<Message, 'chat_jid' | 'sender' | 'verb'>): RouteFields {
  const { platform, room } = parseJid(msg.chat_jid);
  return { platform, room, chat_jid: msg.chat_jid, sender: msg.sender, verb: msg.verb };
}

/** A group folder path: lowercase segments of `a-z0-9_-` joined by `/`. */
export const FOLDER_RE = /^[a-z0-9_-]+(\/[a-z0-9_-]+)*$/;

/**
 * The longest group folder and the longest segment of one: a segment is a directory name (at most 255
 * bytes on Linux) and the folder is part of every path gated builds in it, so both stay well below the
 * system's limits.
 */
export const MAX_FOLDER_LENGTH = 200;
export const MAX_FOLDER_SEGMENT = 64;

/** Why `folder` is not a group folder path, or null when it is one. */
export function folderError(folder: string): string | null {
  if (folder.length > MAX_FOLDER_LENGTH)
    return `${folder.length} characters; a group folder has at most ${MAX_FOLDER_LENGTH}`;
  if (!FOLDER_RE.test(folder)) return "lowercase segments of a-z0-9_- joined by '/', no '..', no leading '/'";
  const long = folder.split('/').find((s) => s.length > MAX_FOLDER_SEGMENT);
  if (long !== undefined)
    return `a segment of ${long.length} characters; each segment has at most ${MAX_FOLDER_SEGMENT}`;
  return null;
}

/** True when `folder` is a valid group folder path (no `..`, no leading `/`, no empty segment, not too long). */
export function isValidFolder(folder: string): boolean {
  return folderError(folder) === null;
}

/** The folder and its ancestors, nearest first: `a/b/c` → `a/b/c`, `a/b`, `a`. */
export function folderChain(folder: string): string[] {
  const parts = folder.split('/');
  return parts.map((_, i) => parts.slice(0, parts.length - i).join('/'));
}

/** `a/b/c` → `a/b`; a top-level folder has no parent. */
export function parentFolder(folder: string): string | undefined {
  const i = folder.lastIndexOf('/');
  return i < 0 ? undefined : folder.slice(0, i);
}

/** True when `group` is `root` or lies below it. */
export function inTree(group: string, root: string): boolean {
  return group === root || group.startsWith(root + '/');
}

/** A topic name as stored (without `#`). */
export const TOPIC_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** Current time as the database stores it: UTC ISO-8601 with milliseconds. */
export function isoNow(now: number = Date.now()): string {
  return new Date(now).toISOString();
}
