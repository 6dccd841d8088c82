import type { Message } from '../core/types.js';

/**
 * The rows the queue's store hands out (store/queue.ts): a batch's messages, the lanes that wait, what a
 * dispatch wrote and the group facts a run needs. Plain data, read with the statements of queue-sql.ts.
 */

/**
 * One message of a batch: the fields of its `messages` row (core/types.ts) the agent receives, plus where a
 * reply to it goes (its topic, the platform thread, for the reply row).
 */
export interface BatchRow extends Pick<
  Message,
  | 'id'
  | 'sender'
  | 'sender_name'
  | 'content'
  | 'verb'
  | 'timestamp'
  | 'platform_msg_id'
  | 'chat_jid'
  | 'topic'
  | 'sender_auth'
  | 'platform_role'
  | 'transcript'
> {
  /** 1: an /interrupt's text, which interrupts the turn in progress before it is written (docs/PROTOCOL.md). */
  interrupts: number;
  /** 1 when the message has attachments rows, 0 when not (read with the row; undefined: not known). */
  files?: number;
  /** router_state 'access_version' as of the read, so the sender's role needs no read of its own. */
  access_version?: string | null;
}

/** A key with ready rows, in lane order. */
export interface ReadyLane {
  group: string;
  topic: string;
}

/** Ready rows of one key, summarized (snapshot, facts). */
export interface LaneSummary extends ReadyLane {
  /** sessionKeyId of the key. */
  keyId: string;
  /** All ready rows, eligible or in backoff. */
  ready: number;
  eligible: number;
  /** The chat of the oldest ready row. */
  chat_jid: string;
  ready_at: number;
  /** Earliest not_before among rows not yet eligible. */
  next_retry: number | null;
}

/** What one dispatch wrote. */
export interface Dispatched {
  runId: number;
  chatJid: string;
  rows: BatchRow[];
  sessionId: string | null;
  systemNotes: string[];
  systemNoteIds: number[];
  /** Rows that could not be handed to an agent and ended `failed` (runId is 0 when none could). */
  failed: FailedRow[];
}

/** A row the queue ended as `failed`, and why. */
export interface FailedRow {
  id: number;
  error: string;
}

/** registered_groups fields a runtime needs. */
export interface GroupRow {
  image: string | null;
  /** The docker network its containers join (NULL: none). */
  network: string | null;
  mounts: string | null;
  /** registered_groups.busy as stored (read it with busyModeOf). */
  busy: string | null;
  /** 1 when the group is bound to a repository (a `group_repos` row: its topics work in worktrees). */
  repo?: number;
  /** registered_groups.agent and .model (the run's setup takes them from here instead of a read). */
  agent?: string | null;
  model?: string | null;
}
