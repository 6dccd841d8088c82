import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { parseJid } from '../core/types.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { Channel } from '../channels/channel.js';
import type { DraftsEnd, PartialText } from '../core/signals.js';
import { DraftStore } from '../store/drafts.js';
import { flushGroup, whenWritable } from '../store/group-commit.js';
import { draftMarkdown } from '../core/draft-markdown.js';
import {
  inRange,
  newChat,
  newThread,
  turnThread,
  type ChatDraft,
  type ChatState,
  type Drafts,
  type DraftsOptions,
} from './draft-chats.js';
import { draftBudgets, floodWaitOf, type DraftBudget } from './draft-budget.js';
import { partsFor } from './format.js';

/**
 * Streaming drafts (docs/CHANNELS.md, "Drafts"). An agent's `partial` blocks show as ONE message per chat
 * thread (the topic of the turn's messages: a web chat tab, a forum thread; '' for most chats), posted at
 * the first draft and edited in place after that, a chat's threads together at most once per `minIntervalMs`
 * and within the platform's drafts a second (the newest text wins), formatted as the answer's first part.
 * When the turn's answer is delivered, the draft becomes the answer: edited to the final text when it fits
 * one part (and has no files, and the channel's drafts can take an answer: not `finalReplaces`), otherwise
 * removed before the answer is sent as usual. So the final text appears once, never twice.
 *
 * Drafts are not replies: they are never stored in `messages`. Only the draft's platform id, turn and text
 * are kept, in `drafts` (one row per chat and thread, written when a draft is posted or shows another turn,
 * not at each edit), so that after a crash the next answer in that chat still finds the stale draft and
 * edits or removes it, and a re-run's drafts reuse it instead of posting a second one.
 */

export type { Drafts, DraftsOptions } from './draft-chats.js';

/** Creates the drafts of a gated process. */
export function createDrafts(opts: DraftsOptions): Drafts {
  const drafts = new ChatDrafts(opts);
  const unlisten = opts.signals
    ? [opts.signals.partial.on((d) => drafts.partial(d)), opts.signals.draftsEnd.on((e) => drafts.end(e))]
    : [];
  return {
    partial: (d) => drafts.partial(d),
    takeOver: (messageId, chatJid, parts, files) => drafts.takeOver(messageId, chatJid, parts, files),
    answered: (chatJid, platformId) => drafts.store.answered(chatJid, platformId),
    end: (e) => drafts.end(e),
    kept: () => drafts.size,
    async stop() {
      for (const off of unlisten) off();
      await drafts.stop();
    },
  };
}

/**
 * The drafts of every chat. Edits are paced by one worker on the driver (core/worker.ts): a partial block
 * sets its thread's pending text and wakes it; its step shows every pending text whose chat may be edited
 * now, forgets the chats that went quiet, and asks to run again when the next one may.
 */
class ChatDrafts {
  readonly store: DraftStore;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly interval: number;
  private readonly byPlatform: Map<string, Channel>;
  private readonly chats = new Map<string, ChatState>();
  // The threads with a text to show, and the chats whose work all ended (forgotten once quiet).
  private readonly waiting = new Set<ChatDraft>();
  private readonly settled = new Set<ChatState>();
  // Chats with draft rows but no state kept (an earlier process's, a chat forgotten while its row stayed):
  // an answer looks up only these and the kept chats, so a chat that never showed a draft reads nothing.
  private readonly left: Set<string>;
  private readonly pacer: Worker;
  private readonly budgets: Map<string, DraftBudget>;
  private stopped = false;

  constructor(private readonly opts: DraftsOptions) {
    this.store = new DraftStore(opts.db);
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
    this.interval = opts.minIntervalMs ?? 1000;
    this.byPlatform = new Map(opts.channels.map((c) => [c.platform, c]));
    this.left = new Set(this.store.chats());
    this.budgets = draftBudgets([...this.byPlatform.keys()], this.now());
    this.pacer = createWorker({
      name: 'drafts',
      log: opts.log,
      step: () => this.showDue(),
      keepAlive: false,
      now: this.now,
    });
    this.pacer.start();
  }

  /** A partial block arrived: it becomes its thread's pending text. Never throws. */
  partial(d: PartialText): void {
    try {
      if (this.stopped || !this.channelOf(d.chatJid)) return;
      const e = this.chats.get(d.chatJid)?.ended;
      if (e && inRange(e, d.runId, d.turn)) return;
      // The thread the turn came from: two tabs (topics) of one web chat stream two drafts at once.
      const c = this.stateOf(
        d.chatJid,
        turnThread(this.chatOf(d.chatJid), d, () => this.store.turnOf(d.runId, d.chatJid)),
      );
      c.pending = d;
      this.waiting.add(c);
      this.pacer.wake();
    } catch (err) {
      this.log.error({ chat: d.chatJid, err: coerceError(err).message }, 'draft dropped');
    }
  }

  /** The takeover of Drafts.takeOver, after anything queued for the answer's thread. */
  takeOver(
    messageId: number,
    chatJid: string,
    parts: readonly string[],
    files: number,
  ): Promise<string | null> {
    const channel = this.byPlatform.get(parseJid(chatJid).platform);
    if (!channel?.drafts) return Promise.resolve(null);
    if (!this.chats.has(chatJid) && !this.left.delete(chatJid)) return Promise.resolve(null);
    // The answer goes to the thread its turn came from, where that turn's draft is.
    const reply = this.store.reply(messageId);
    const c = this.stateOf(chatJid, reply?.topic ?? '');
    return this.serial(c, () => this.becomeAnswer(c, channel.drafts!, reply?.kind ?? null, parts, files));
  }

  /** Ends the drafts of the turns `e` names (Drafts.end). Never throws. */
  end(e: DraftsEnd): void {
    try {
      const chat = this.chatOf(e.chatJid);
      chat.ended = e;
      chat.endedAt = this.now();
      const threads = new Set([...this.store.threadsOfRun(e.chatJid, e.runId), ...chat.threads.keys()]);
      if (threads.size === 0) this.settle(chat);
      for (const thread of threads) {
        const c = this.stateOf(e.chatJid, thread);
        if (c.pending && inRange(e, c.pending.runId, c.pending.turn)) this.unpend(c);
        // After any edit in flight: the row it writes is the one to remove.
        void this.serial(c, () => this.removeEnded(e, thread));
      }
    } catch (err) {
      this.log.error({ chat: e.chatJid, err: coerceError(err).message }, 'ending a draft failed');
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.pacer.stop();
    await Promise.all(
      [...this.chats.values()].flatMap((chat) => [...chat.threads.values()].map((c) => c.chain)),
    );
  }

  /**
   * The pacer's step: shows each pending text whose chat may be edited now and its platform's budget
   * allows, forgets the chats gone quiet; returns when the next may be edited or forgotten.
   */
  private showDue(): number | undefined {
    let next = Infinity;
    const waiting = [...this.waiting].sort((x, y) => x.shownAt - y.shownAt);
    for (const c of waiting) {
      // Another thread of the chat may have edited just now: this one waits for the chat's next slot.
      const due = c.chat.lastEdit + this.interval;
      if (due > this.now()) {
        next = Math.min(next, due);
        continue;
      }
      // The platform's share for drafts (the oldest edits go first): the others wait for its next call.
      const until = this.budgetOf(c.chat.chatJid)?.take(this.now()) ?? 0;
      if (until > 0) {
        next = Math.min(next, until);
        continue;
      }
      c.chat.lastEdit = this.now();
      c.shownAt = this.now();
      // The text is taken when the edit's turn comes: an edit still in flight makes this one show the newest.
      void this.serial(c, async () => {
        const d = c.pending;
        this.unpend(c);
        if (d) await this.show(c, d);
      });
    }
    for (const chat of this.settled) {
      const quietAt = Math.max(chat.lastEdit, chat.endedAt) + this.interval;
      if (!this.idle(chat)) this.settled.delete(chat);
      else if (quietAt > this.now()) next = Math.min(next, quietAt);
      else {
        this.settled.delete(chat);
        this.chats.delete(chat.chatJid);
        if (this.store.hasRows(chat.chatJid)) this.left.add(chat.chatJid);
      }
    }
    return next === Infinity ? undefined : next;
  }

  /** The chat has nothing pending and nothing in flight. */
  private idle(chat: ChatState): boolean {
    for (const c of chat.threads.values()) if (c.pending || c.busy > 0) return false;
    return true;
  }

  /** The chat's work all ended: the pacer forgets it once it stays quiet past its pacing slot. */
  private settle(chat: ChatState): void {
    if (this.stopped || !this.idle(chat)) return;
    this.settled.add(chat);
    this.pacer.wake();
  }

  private unpend(c: ChatDraft): void {
    c.pending = undefined;
    this.waiting.delete(c);
  }

  /** Posts the thread's draft, or edits the one it shows, to the text of `d`. */
  private async show(c: ChatDraft, d: PartialText): Promise<void> {
    const { thread } = c;
    const { chatJid } = c.chat;
    const channel = this.channelOf(chatJid);
    if (!channel || this.stopped) return;
    const ops = channel.drafts!;
    // Formatted as the answer will be (its first part): valid at any cut, never raw Markdown.
    const text = partsFor(draftMarkdown(d.text), channel)[0] ?? '';
    if (text.trim() === '') return;
    const found = this.store.get(chatJid, thread);
    // A draft already edited into an answer is that answer now: the next turn gets a new draft.
    const row = found?.final ? undefined : found;
    try {
      let id = row?.platform_msg_id;
      if (id) {
        // The text it shows: the last edit's (an edit writes no row), else the row's.
        if ((c.shown?.id === id ? c.shown.text : row!.text) !== text)
          await ops.edit(chatJid, id, text, false);
      } else {
        const turn = this.store.turnOf(d.runId, chatJid);
        id = await ops.open(chatJid, text, thread, turn?.platform_msg_id ?? null);
      }
      c.shown = { id, text };
      // A new draft, or one of another turn: its id durable now, or a crash leaves a draft nobody removes
      // (another process's lock waited for off the event loop). An edit of the same turn writes nothing.
      if (row?.platform_msg_id === id && row.run_id === d.runId && row.turn === d.turn) return;
      const shown = { chat: chatJid, thread, run: d.runId, turn: d.turn, id, text, at: this.now() };
      await whenWritable(this.opts.db, () => {
        this.store.save(shown);
        flushGroup(this.opts.db);
      });
    } catch (err) {
      const wait = floodWaitOf(err);
      if (wait !== undefined) return this.flooded(c, d, wait);
      // A draft is a courtesy: a failed post or edit is skipped, the next draft or the answer tries again.
      this.log.debug({ chat: chatJid, err: coerceError(err).message }, 'draft not shown');
    }
  }

  /**
   * The platform answered `d`'s draft with its flood limit: its drafts wait `wait` ms, then show the newest
   * text, this one unless a newer came or its turn ended meanwhile (never a draft of an ended turn).
   */
  private flooded(c: ChatDraft, d: PartialText, wait: number): void {
    const until = this.now() + wait;
    this.budgetOf(c.chat.chatJid)?.pause(until);
    c.chat.lastEdit = Math.max(c.chat.lastEdit, until - this.interval);
    const e = c.chat.ended;
    if (!c.pending && !this.stopped && !(e && inRange(e, d.runId, d.turn))) {
      c.pending = d;
      this.waiting.add(c);
    }
    this.pacer.wake();
  }

  private budgetOf(chatJid: string): DraftBudget | undefined {
    return this.budgets.get(parseJid(chatJid).platform);
  }

  /**
   * Turns the thread's draft into the answer: edited to it when the answer is one part without files (and
   * the channel's drafts can take an answer), else removed; a notice (not `reply`) leaves it alone. Returns
   * the platform id of part 0 when the draft now is part 0; throws the platform's flood limit, to retry.
   */
  private async becomeAnswer(
    c: ChatDraft,
    ops: NonNullable<Channel['drafts']>,
    kind: string | null,
    parts: readonly string[],
    files: number,
  ): Promise<string | null> {
    const { thread } = c;
    const { chatJid } = c.chat;
    const row = this.store.get(chatJid, thread);
    // The answer is here: a draft edit not made yet would show an older text after it, in a new message
    // when the draft was already taken over (a stale draft under the answer).
    if (kind === 'reply') this.unpend(c);
    if (!row) return null;
    if (row.final && row.platform_msg_id && this.store.recorded(row.platform_msg_id)) {
      // The answer it became was recorded before a crash could clear the row: nothing to take over.
      this.store.remove(chatJid, thread);
      return null;
    }
    // Gateway notices (/ping, errors) leave a turn's draft alone; the turn's own answer takes it over.
    if (kind !== 'reply') return null;
    const id = row.platform_msg_id;
    if (id && parts.length === 1 && files === 0 && !ops.finalReplaces) {
      try {
        // Kept (final) until delivery records the part: a crash in between edits it again, harmlessly.
        await ops.edit(chatJid, id, parts[0]!, true);
        this.store.markFinal(chatJid, thread);
        return id;
      } catch (err) {
        // Over the flood limit: delivery waits it out and asks again (the answer is never sent beside it).
        this.floodedAnswer(chatJid, err);
        this.log.info({ chat: chatJid, err: coerceError(err).message }, 'draft not editable; replacing it');
      }
    }
    if (id) {
      await ops.remove(chatJid, id).catch((err: unknown) => {
        this.floodedAnswer(chatJid, err);
        this.log.info({ chat: chatJid, err: coerceError(err).message }, 'stale draft not removed');
      });
    }
    this.store.remove(chatJid, thread);
    return null;
  }

  /** Throws `err` when it is the platform's flood limit, and holds the platform's drafts for its wait. */
  private floodedAnswer(chatJid: string, err: unknown): void {
    const wait = floodWaitOf(err);
    if (wait === undefined) return;
    this.budgetOf(chatJid)?.pause(this.now() + wait);
    throw err;
  }

  /** Removes the draft of a thread when it shows one of the ended turns. */
  private async removeEnded(e: DraftsEnd, thread: string): Promise<void> {
    const row = this.store.get(e.chatJid, thread);
    if (!row || row.final || !inRange(e, row.run_id, row.turn)) return;
    const channel = this.byPlatform.get(parseJid(e.chatJid).platform);
    try {
      if (row.platform_msg_id && channel?.drafts) await channel.drafts.remove(e.chatJid, row.platform_msg_id);
    } catch (err) {
      // Over the flood limit the row stays: the chat's next draft or answer takes that message over.
      const wait = floodWaitOf(err);
      if (wait !== undefined) return this.budgetOf(e.chatJid)?.pause(this.now() + wait);
      this.log.info({ chat: e.chatJid, err: coerceError(err).message }, 'ended draft not removed');
    }
    this.store.remove(e.chatJid, thread);
  }

  /** The channel of a chat whose drafts are shown (it has drafts and streams), else undefined. */
  private channelOf(chatJid: string): Channel | undefined {
    const ch = this.byPlatform.get(parseJid(chatJid).platform);
    return ch?.drafts && this.opts.streamChannels.includes(ch.platform) ? ch : undefined;
  }

  private chatOf(chatJid: string): ChatState {
    let chat = this.chats.get(chatJid);
    if (!chat) {
      chat = newChat(chatJid);
      this.chats.set(chatJid, chat);
    }
    return chat;
  }

  private stateOf(chatJid: string, thread: string): ChatDraft {
    const chat = this.chatOf(chatJid);
    let c = chat.threads.get(thread);
    if (!c) {
      c = newThread(chat, thread);
      chat.threads.set(thread, c);
    }
    return c;
  }

  /** Runs `fn` after everything queued for the thread; the chat may go quiet when the last one ends. */
  private serial<T>(c: ChatDraft, fn: () => Promise<T>): Promise<T> {
    c.busy += 1;
    const next = c.chain.then(fn);
    c.chain = next.then(
      () => this.done(c),
      () => this.done(c),
    );
    return next;
  }

  private done(c: ChatDraft): void {
    c.busy -= 1;
    if (c.busy === 0) this.settle(c.chat);
  }

  /** How many chats the drafts keep state of (tests: a quiet chat is forgotten). */
  get size(): number {
    return this.chats.size;
  }
}
