import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { parseJid } from '../core/types.js';
import type { Channel } from '../channels/channel.js';
import type { DraftsEnd, PartialText, Signals } from '../core/signals.js';
import type { Db } from '../store/db.js';
import { draftMarkdown } from '../core/draft-markdown.js';
import { partsFor } from './format.js';

/**
 * Streaming drafts (docs/CHANNELS.md, "Drafts"). An agent's `partial` blocks show as ONE message per chat
 * thread (the topic of the turn's messages: a web chat tab, a forum thread; '' for most chats),
 * posted at the first draft and edited in place after that, at most once per `minIntervalMs` (the newest
 * text wins: drafts that arrive in between are never shown), each formatted as the answer's first part is
 * (Telegram HTML, mrkdwn…), so a draft is rendered like the answer and valid wherever the text was cut. When the turn's answer is delivered, the
 * draft becomes the answer: edited to the final text when it fits one part (and has no files, and the
 * channel's drafts can take an answer: not `finalReplaces`), otherwise removed before the answer is sent as
 * usual. So the final text appears once, never twice.
 *
 * Drafts are not replies: they are never stored in `messages`. Only the draft's platform id is kept, in
 * `drafts` (one row per chat and thread), so that after a crash the next answer in that chat still finds the stale
 * draft and edits or removes it, and a re-run's drafts reuse it instead of posting a second one.
 */

/** How a channel's chats show work in progress: `stream` (drafts) or `batch` (answers only). */
export type StreamMode = 'stream' | 'batch';

/** What the drafts need. */
export interface DraftsOptions {
  db: Db;
  channels: Channel[];
  log: Logger;
  /** The mode of a platform (GATED_STREAM_CHANNELS). A channel without draft support is always batch. */
  mode: (platform: string) => StreamMode;
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
  /** Waits for edits in flight and drops pending ones. */
  stop(): Promise<void>;
}

/** The draft of one thread of a chat (a web chat tab, a forum thread; '' for the chat itself). */
interface ChatDraft {
  chatJid: string;
  thread: string;
  pending: PartialText | undefined;
  timer: NodeJS.Timeout | undefined;
  chain: Promise<void>;
}

interface DraftRow {
  run_id: number | null;
  turn: number | null;
  platform_msg_id: string | null;
  text: string | null;
  /** 1 once the draft was edited into an answer's part 0 (until delivery has recorded that part). */
  final: number;
}

/** Creates the drafts of a gated process. */
export function createDrafts(opts: DraftsOptions): Drafts {
  const { db, log } = opts;
  const now = opts.now ?? Date.now;
  const interval = opts.minIntervalMs ?? 1000;
  const byPlatform = new Map(opts.channels.map((c) => [c.platform, c]));
  const chats = new Map<string, ChatDraft>();
  // When each chat's drafts were last edited: the limit is per chat, whichever thread the edit was in.
  const lastEdit = new Map<string, number>();
  // Per chat, the newest turns whose drafts ended: late drafts of them (already on their way) are dropped.
  const ended = new Map<string, DraftsEnd>();
  let stopped = false;
  const s = {
    get: db.prepare<[string, string], DraftRow>(
      `SELECT run_id, turn, platform_msg_id, text, final FROM drafts WHERE chat_jid = ? AND thread = ?`,
    ),
    upsert: db.prepare(
      `INSERT INTO drafts (chat_jid, thread, run_id, turn, platform_msg_id, text, updated_at)
       VALUES (@chat, @thread, @run, @turn, @id, @text, @at)
       ON CONFLICT (chat_jid, thread) DO UPDATE SET run_id = excluded.run_id, turn = excluded.turn,
         platform_msg_id = excluded.platform_msg_id, text = excluded.text, updated_at = excluded.updated_at,
         final = 0`,
    ),
    markFinal: db.prepare(`UPDATE drafts SET final = 1 WHERE chat_jid = ? AND thread = ?`),
    answered: db.prepare(`DELETE FROM drafts WHERE chat_jid = ? AND final = 1 AND platform_msg_id = ?`),
    recorded: db.prepare(`SELECT 1 FROM outbound_parts WHERE platform_msg_id = ? LIMIT 1`).pluck(),
    remove: db.prepare(`DELETE FROM drafts WHERE chat_jid = ? AND thread = ?`),
    threads: db
      .prepare<[string, number], string>(`SELECT thread FROM drafts WHERE chat_jid = ? AND run_id = ?`)
      .pluck(),
    reply: db.prepare<[number], { kind: string | null; topic: string }>(
      `SELECT kind, topic FROM messages WHERE id = ?`,
    ),
    // The thread (messages.topic) and newest message of the turn being drafted: its rows are the run's
    // running ones.
    turn: db.prepare<[number, string], { topic: string; platform_msg_id: string | null }>(
      `SELECT topic, platform_msg_id FROM messages WHERE run_id = ? AND state = 'running' AND chat_jid = ?
       ORDER BY id DESC LIMIT 1`,
    ),
  };

  const channelOf = (chatJid: string): Channel | undefined => {
    const ch = byPlatform.get(parseJid(chatJid).platform);
    return ch?.drafts && opts.mode(ch.platform) === 'stream' ? ch : undefined;
  };

  const stateOf = (chatJid: string, thread: string): ChatDraft => {
    const key = `${chatJid}\u0000${thread}`;
    let c = chats.get(key);
    if (!c) {
      c = { chatJid, thread, pending: undefined, timer: undefined, chain: Promise.resolve() };
      chats.set(key, c);
    }
    return c;
  };

  const arm = (c: ChatDraft): void => {
    const wait = Math.max(0, (lastEdit.get(c.chatJid) ?? 0) + interval - now());
    c.timer = setTimeout(() => flush(c), wait);
    c.timer.unref();
  };

  /** Runs `fn` after everything queued for the chat: a draft edit and the takeover never interleave. */
  const serial = <T>(c: ChatDraft, fn: () => Promise<T>): Promise<T> => {
    const next = c.chain.then(fn);
    c.chain = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  };

  const flush = (c: ChatDraft): void => {
    c.timer = undefined;
    const { chatJid, thread } = c;
    // Another thread of the chat edited since this edit was planned: wait for the chat's next slot.
    if ((lastEdit.get(chatJid) ?? 0) + interval > now()) return arm(c);
    lastEdit.set(chatJid, now());
    void serial(c, async () => {
      const d = c.pending;
      c.pending = undefined;
      const channel = channelOf(chatJid);
      if (!d || !channel || stopped) return;
      const ops = channel.drafts!;
      // Formatted as the answer will be (its first part): valid at any cut, never raw Markdown.
      const text = partsFor(draftMarkdown(d.text), channel)[0] ?? '';
      if (text.trim() === '') return;
      const found = s.get.get(chatJid, thread);
      // A draft already edited into an answer is that answer now: the next turn gets a new draft.
      const row = found?.final ? undefined : found;
      try {
        if (row?.platform_msg_id) {
          if (row.text !== text) await ops.edit(chatJid, row.platform_msg_id, text, false);
          s.upsert.run({
            chat: chatJid,
            thread,
            run: d.runId,
            turn: d.turn,
            id: row.platform_msg_id,
            text,
            at: now(),
          });
        } else {
          const turn = s.turn.get(d.runId, chatJid);
          const id = await ops.open(chatJid, text, thread, turn?.platform_msg_id ?? null);
          s.upsert.run({ chat: chatJid, thread, run: d.runId, turn: d.turn, id, text, at: now() });
        }
      } catch (err) {
        // A draft is a courtesy: a failed edit is skipped, the next draft or the answer tries again.
        log.debug({ chat: chatJid, err: coerceError(err).message }, 'draft not shown');
      }
    });
  };

  const inRange = (e: DraftsEnd, runId: number | null | undefined, turn: number | null | undefined) =>
    runId === e.runId && turn !== null && turn !== undefined && turn >= e.from && turn <= e.to;

  const endDrafts = (e: DraftsEnd): void => {
    ended.set(e.chatJid, e);
    const threads = new Set(s.threads.all(e.chatJid, e.runId));
    for (const c of chats.values()) if (c.chatJid === e.chatJid) threads.add(c.thread);
    for (const thread of threads) {
      const c = stateOf(e.chatJid, thread);
      if (c.pending && inRange(e, c.pending.runId, c.pending.turn)) {
        clearTimeout(c.timer);
        c.timer = undefined;
        c.pending = undefined;
      }
      // After any edit in flight: the row it writes is the one to remove.
      void serial(c, async () => {
        const row = s.get.get(e.chatJid, thread);
        if (!row || row.final || !inRange(e, row.run_id, row.turn)) return;
        const channel = byPlatform.get(parseJid(e.chatJid).platform);
        if (row.platform_msg_id && channel?.drafts) {
          await channel.drafts
            .remove(e.chatJid, row.platform_msg_id)
            .catch((err: unknown) =>
              log.info({ chat: e.chatJid, err: coerceError(err).message }, 'ended draft not removed'),
            );
        }
        s.remove.run(e.chatJid, thread);
      });
    }
  };

  const drafts: Drafts = {
    partial(d) {
      try {
        if (stopped || !channelOf(d.chatJid)) return;
        const e = ended.get(d.chatJid);
        if (e && e.runId === d.runId && d.turn >= e.from && d.turn <= e.to) return;
        // The thread the turn came from: two tabs (topics) of one web chat stream two drafts at once.
        const c = stateOf(d.chatJid, s.turn.get(d.runId, d.chatJid)?.topic ?? '');
        c.pending = d;
        if (c.timer) return; // the scheduled edit will show the newest text
        arm(c);
      } catch (err) {
        log.error({ chat: d.chatJid, err: coerceError(err).message }, 'draft dropped');
      }
    },

    async takeOver(messageId, chatJid, parts, files) {
      const channel = byPlatform.get(parseJid(chatJid).platform);
      if (!channel?.drafts) return null;
      // The answer goes to the thread its turn came from, where that turn's draft is.
      const reply = s.reply.get(messageId);
      const thread = reply?.topic ?? '';
      const c = stateOf(chatJid, thread);
      return serial(c, async (): Promise<string | null> => {
        const row = s.get.get(chatJid, thread);
        if (reply?.kind === 'reply') {
          // The answer is here: a draft edit not made yet would show an older text after it, in a new
          // message when the draft was already taken over (a stale draft under the answer).
          clearTimeout(c.timer);
          c.timer = undefined;
          c.pending = undefined;
        }
        if (!row) return null;
        if (row.final && row.platform_msg_id && s.recorded.get(row.platform_msg_id) !== undefined) {
          // The answer it became was recorded before a crash could clear the row: nothing to take over.
          s.remove.run(chatJid, thread);
          return null;
        }
        // Gateway notices (/ping, errors) leave a turn's draft alone; the turn's own answer takes it over.
        if (reply?.kind !== 'reply') return null;
        const ops = channel.drafts!;
        const id = row.platform_msg_id;
        if (id && parts.length === 1 && files === 0 && !ops.finalReplaces) {
          try {
            // Kept (final) until delivery records the part: a crash in between edits it again, harmlessly.
            await ops.edit(chatJid, id, parts[0]!, true);
            s.markFinal.run(chatJid, thread);
            return id;
          } catch (err) {
            log.info({ chat: chatJid, err: coerceError(err).message }, 'draft not editable; replacing it');
          }
        }
        if (id) {
          await ops
            .remove(chatJid, id)
            .catch((err: unknown) =>
              log.info({ chat: chatJid, err: coerceError(err).message }, 'stale draft not removed'),
            );
        }
        s.remove.run(chatJid, thread);
        return null;
      });
    },

    answered(chatJid, platformId) {
      s.answered.run(chatJid, platformId);
    },

    end(e) {
      try {
        endDrafts(e);
      } catch (err) {
        log.error({ chat: e.chatJid, err: coerceError(err).message }, 'ending a draft failed');
      }
    },

    async stop() {
      stopped = true;
      for (const off of unlisten) off();
      for (const c of chats.values()) clearTimeout(c.timer);
      await Promise.all([...chats.values()].map((c) => c.chain));
    },
  };
  const unlisten = opts.signals
    ? [opts.signals.partial.on((d) => drafts.partial(d)), opts.signals.draftsEnd.on((e) => drafts.end(e))]
    : [];
  return drafts;
}
