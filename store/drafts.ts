import type { Db } from './db.js';

/**
 * The `drafts` table: per chat and thread, the platform id, turn and text of the draft a turn in progress
 * shows (delivery/drafts.ts), never the draft as a reply in `messages`: after a crash the next answer in
 * that chat still finds the stale draft and edits or removes it.
 */

/** One `drafts` row. */
export interface DraftRow {
  run_id: number | null;
  turn: number | null;
  platform_msg_id: string | null;
  text: string | null;
  /** 1 once the draft was edited into an answer's part 0 (until delivery has recorded that part). */
  final: number;
}

/** What a draft shows, as saved when it was posted or came to show another turn (an edit saves nothing). */
export interface DraftShown {
  chat: string;
  thread: string;
  run: number;
  turn: number;
  id: string;
  text: string;
  at: number;
}

/** The statements of the drafts, prepared once. */
export class DraftStore {
  private readonly s;

  constructor(db: Db) {
    this.s = {
      get: db.prepare<[string, string], DraftRow>(
        `SELECT run_id, turn, platform_msg_id, text, final FROM drafts WHERE chat_jid = ? AND thread = ?`,
      ),
      save: db.prepare<DraftShown>(
        `INSERT INTO drafts (chat_jid, thread, run_id, turn, platform_msg_id, text, updated_at)
         VALUES (@chat, @thread, @run, @turn, @id, @text, @at)
         ON CONFLICT (chat_jid, thread) DO UPDATE SET run_id = excluded.run_id, turn = excluded.turn,
           platform_msg_id = excluded.platform_msg_id, text = excluded.text, updated_at = excluded.updated_at,
           final = 0`,
      ),
      markFinal: db.prepare<[string, string]>(
        `UPDATE drafts SET final = 1 WHERE chat_jid = ? AND thread = ?`,
      ),
      answered: db.prepare<[string, string]>(
        `DELETE FROM drafts WHERE chat_jid = ? AND final = 1 AND platform_msg_id = ?`,
      ),
      recorded: db
        .prepare<[string], number>(`SELECT 1 FROM outbound_parts WHERE platform_msg_id = ? LIMIT 1`)
        .pluck(),
      chats: db.prepare<[], string>(`SELECT DISTINCT chat_jid FROM drafts`).pluck(),
      hasRows: db.prepare<[string], number>(`SELECT 1 FROM drafts WHERE chat_jid = ? LIMIT 1`).pluck(),
      remove: db.prepare<[string, string]>(`DELETE FROM drafts WHERE chat_jid = ? AND thread = ?`),
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
  }

  /** The chats that have a draft row. */
  chats(): string[] {
    return this.s.chats.all();
  }

  /** Whether a chat has a draft row. */
  hasRows(chatJid: string): boolean {
    return this.s.hasRows.get(chatJid) !== undefined;
  }

  /** The draft of a chat's thread, if it has one. */
  get(chatJid: string, thread: string): DraftRow | undefined {
    return this.s.get.get(chatJid, thread);
  }

  /** Records what a draft shows after it was posted or edited (not final any more). */
  save(shown: DraftShown): void {
    this.s.save.run(shown);
  }

  /** The draft was edited into an answer's part 0; kept until delivery records that part. */
  markFinal(chatJid: string, thread: string): void {
    this.s.markFinal.run(chatJid, thread);
  }

  /** Delivery recorded the part a final draft became: the chat has no draft any more. */
  answered(chatJid: string, platformId: string): void {
    this.s.answered.run(chatJid, platformId);
  }

  /** Whether a platform message id was recorded as a part of an answer. */
  recorded(platformId: string): boolean {
    return this.s.recorded.get(platformId) !== undefined;
  }

  remove(chatJid: string, thread: string): void {
    this.s.remove.run(chatJid, thread);
  }

  /** The threads of a chat whose drafts show turns of run `runId`. */
  threadsOfRun(chatJid: string, runId: number): string[] {
    return this.s.threads.all(chatJid, runId);
  }

  /** The kind and thread of an outbound row (the answer that may take a draft over). */
  reply(messageId: number): { kind: string | null; topic: string } | undefined {
    return this.s.reply.get(messageId);
  }

  /** The thread and newest message of the turn run `runId` is drafting in a chat. */
  turnOf(runId: number, chatJid: string): { topic: string; platform_msg_id: string | null } | undefined {
    return this.s.turn.get(runId, chatJid);
  }
}
