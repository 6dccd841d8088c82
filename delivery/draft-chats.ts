import type { DraftsEnd, PartialText } from '../core/signals.js';

/**
 * What the drafts keep of one chat while it is busy: forgotten once it goes quiet (nothing pending or in
 * flight and its pacing slot, and that of its last end, passed), so that a chat that wrote once costs
 * nothing after; what must survive (the draft's platform id) is a row.
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
  /** When the pacer last gave this thread an edit: of a chat's threads, the one waiting longest goes first. */
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
