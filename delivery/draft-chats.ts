import type { Channel } from '../channels/channel.js';
import type { Logger } from '../core/log.js';
import type { DraftsEnd, PartialText, Signals } from '../core/signals.js';
import type { Db } from '../store/db.js';

/** What the drafts need. */
export interface DraftsOptions {
  db: Db;
  channels: Channel[];
  log: Logger;
  /**
   * The platforms whose chats see drafts (GATED_STREAM_CHANNELS, `stream`); the others get the answer only
   * (`batch`), as does a channel without draft support.
   */
  streamChannels: readonly string[];
  /** Shortest time between two edits of one chat's draft. Default 1000 ms. */
  minIntervalMs?: number;
  now?: () => number;
  /**
   * The drafts show every `partial` signal (an agent's turn in progress) and end the drafts of turns a
   * `draftsEnd` signal names.
   */
  signals?: Pick<Signals, 'partial' | 'draftsEnd'>;
}

/** The drafts of every chat. */
export interface Drafts {
  /** A partial block arrived: show it (now, or at the next allowed edit). Never throws. */
  partial(d: PartialText): void;
  /**
   * Called by delivery before it sends part 0 of outbound row `messageId`: if the chat shows a draft, it is
   * turned into the answer. Returns the platform id to record for part 0 when the draft now IS part 0
   * (edited to `parts[0]`), or null when delivery should send every part itself.
   */
  takeOver(
    messageId: number,
    chatJid: string,
    parts: readonly string[],
    files: number,
  ): Promise<string | null>;
  /** Delivery recorded part 0 that a takeover returned: the chat has no draft any more. */
  answered(chatJid: string, platformId: string): void;
  /**
   * Turns `from`..`to` of run `runId` ended without a reply of their own (interrupted with no text,
   * stopped, or left open by a run that ended): the draft they show is removed from the platform and
   * forgotten, an edit not made yet is dropped, and later drafts of those turns are ignored. So no draft is
   * left stale, no edit arrives after the end, and the next turn's draft is a new message. Never throws.
   */
  end(e: DraftsEnd): void;
  /** How many chats it keeps state of now: a chat gone quiet is forgotten. */
  kept(): number;
  /** Waits for edits in flight and drops pending ones. */
  stop(): Promise<void>;
}

/**
 * What the drafts keep of one chat while it is busy: forgotten once it goes quiet (nothing pending or in
 * flight and its pacing slot, and that of its last end, passed), so that a chat that wrote once costs
 * nothing after; what must survive (the draft's platform id and turn) is a row.
 */
export interface ChatState {
  chatJid: string;
  /** Its threads (a web chat tab, a forum thread; '' for the chat itself) with a draft in progress. */
  threads: Map<string, ChatDraft>;
  /** When the chat's drafts were last edited: the limit is per chat, whichever thread the edit was in. */
  lastEdit: number;
  /** The newest turns whose drafts ended, and when: late drafts of them (already on their way) are dropped. */
  ended: DraftsEnd | undefined;
  endedAt: number;
  /**
   * The thread of the turn drafted last (its running rows' topic, read once per turn): the partial blocks
   * of one turn, ten a second, all go to that thread.
   */
  turnThread: { runId: number; turn: number; thread: string } | undefined;
}

/** A chat's state when it starts being busy. */
export function newChat(chatJid: string): ChatState {
  return { chatJid, threads: new Map(), lastEdit: 0, ended: undefined, endedAt: 0, turnThread: undefined };
}

/** The draft of one thread of a chat. */
export interface ChatDraft {
  chat: ChatState;
  thread: string;
  /** The newest text not shown yet; the pacer shows it at the chat's next allowed edit. */
  pending: PartialText | undefined;
  /** When the pacer last gave this thread an edit: the one shown longest ago goes first, over all chats. */
  shownAt: number;
  /** Everything queued for the thread: a draft edit, an end and the takeover never interleave. */
  chain: Promise<void>;
  /** How many of those have not ended yet. */
  busy: number;
  /** The draft's platform id and the text its last edit showed (an edit writes no row). */
  shown: { id: string; text: string } | undefined;
}

/** A thread's draft state when its first block comes. */
export function newThread(chat: ChatState, thread: string): ChatDraft {
  return {
    chat,
    thread,
    pending: undefined,
    shownAt: 0,
    chain: Promise.resolve(),
    busy: 0,
    shown: undefined,
  };
}

/**
 * The thread of the turn a partial block `d` is of: its running rows' topic (`read`), read once per turn
 * and kept in `chat`; not kept before the turn's rows are found running (a later block reads again).
 */
export function turnThread(
  chat: ChatState,
  d: PartialText,
  read: () => { topic: string } | undefined,
): string {
  const known = chat.turnThread;
  if (known && known.runId === d.runId && known.turn === d.turn) return known.thread;
  const row = read();
  const thread = row?.topic ?? '';
  chat.turnThread = row ? { runId: d.runId, turn: d.turn, thread } : undefined;
  return thread;
}

/** Whether a draft of run `runId`, turn `turn`, is one of the turns `e` ended. */
export function inRange(
  e: DraftsEnd,
  runId: number | null | undefined,
  turn: number | null | undefined,
): boolean {
  return runId === e.runId && turn !== null && turn !== undefined && turn >= e.from && turn <= e.to;
}
