import type { ApprovalButton, Channel } from '../channels/channel.js';
import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Signals } from '../core/signals.js';
import { parseJid } from '../core/types.js';
import type { ApprovalNotifier } from '../queue/asks.js';
import {
  decidedQuestionText,
  decidedText,
  opsText,
  questionText,
  type QuestionTarget,
} from './approval-text.js';
import type { Db } from '../store/db.js';
import { committed, flushGroup, whenWritable } from '../store/group-commit.js';
import { insertOutbound } from '../store/messages.js';
import { toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';

/**
 * How a tool approval reaches its chat (docs/APPROVALS.md, docs/CHANNELS.md "Buttons"): one message with
 * the real input first and the agent's summary after it (approval-text.ts), with buttons where the channel
 * has `approvals` (the whole input then follows as a file when the message could show only its head and
 * tail); otherwise an outbound row the outbox delivers like any answer. When the decision is made the message
 * is edited in place to say how it ended (buttons gone), or, without buttons, a follow-up says it.
 */

/**
 * The least a question asked as a plain message may be (a platform with short messages, Bluesky, gets it
 * split into several): the input is cut only past this.
 */
const PLAIN_LIMIT = 4000;

/** What the notifier needs: the started channels and the signal that wakes delivery for outbound rows. */
export interface ApprovalNotifierOptions {
  db: Db;
  /** The channels that started (filled in once they have: none is asked before). */
  channels: readonly Channel[];
  log: Logger;
  /** `outbound` is fired with each row the notifier writes. */
  signals: Pick<Signals, 'outbound'>;
}

/** The buttons of an asking message, approve first. */
export function approvalButtons(code: string): ApprovalButton[] {
  return [
    { label: 'Approve', command: `/approve ${code}` },
    { label: 'Reject', command: `/reject ${code}` },
  ];
}

/** Makes the notifier the ask broker calls; it never throws (failures are logged, rows stay as they are). */
export function createApprovalNotifier(opts: ApprovalNotifierOptions): ApprovalNotifier {
  return new ApprovalMessages(opts);
}

/** The question messages of tool approvals, and the edits (or follow-ups) that say how each ended. */
class ApprovalMessages implements ApprovalNotifier {
  private readonly store;
  // Questions being sent with buttons, by row id: a decision (or cancellation) told meanwhile waits here,
  // to edit the message once its platform id is known instead of leaving its buttons live.
  private readonly sending = new Map<number, ToolApproval | null>();

  constructor(private readonly opts: ApprovalNotifierOptions) {
    this.store = toolApprovalsOf(opts.db);
  }

  ask(row: ToolApproval): void {
    const { opts } = this;
    const approvals = this.channelOf(row.chat_jid)?.approvals;
    if (!approvals) {
      guard(opts.log, 'asking for an approval', () => this.plain(row));
      return;
    }
    this.sending.set(row.id, null);
    const target = this.targetOf(row.chat_jid)!;
    const question = questionText(row, target);
    const text = opsText(question.text, target);
    // The approval's row first: a crash before its commit would have a redone run ask again.
    Promise.resolve(committed(opts.db))
      .then(() => approvals.ask(row.chat_jid, text, approvalButtons(row.code), row.topic))
      .then((platformId) => {
        if (question.whole !== null) this.sendWhole(row, question.whole, platformId);
        // Durable now, as a delivered part is: the platform has the buttons, and the decision edits them.
        // Written once another process's write lock is had, off the event loop.
        return whenWritable(opts.db, () => {
          this.store.asked(row.id, platformId, null);
          flushGroup(opts.db);
          const late = this.took(row);
          if (late) this.tell({ ...late, platform_id: platformId });
        });
      })
      .catch((err: unknown) => {
        // The buttons failed: ask with the plain message instead, so the question is not lost.
        opts.log.warn({ code: row.code, err: coerceError(err).message }, 'approval buttons failed');
        return whenWritable(opts.db, () => {
          const late = this.took(row);
          guard(opts.log, 'asking for an approval', () => this.plain(row));
          if (late) this.tell(late);
        });
      })
      .catch((err: unknown) =>
        opts.log.error({ err: coerceError(err).message }, 'asking for an approval failed'),
      );
  }

  decided(row: ToolApproval): void {
    if (row.platform_id === null && this.sending.has(row.id)) this.sending.set(row.id, row);
    else this.tell(row);
  }

  /** The question of `row` has been sent (or failed): the decision told meanwhile, if any. */
  private took(row: ToolApproval): ToolApproval | null {
    const late = this.sending.get(row.id) ?? null;
    this.sending.delete(row.id);
    return late;
  }

  private tell(row: ToolApproval): void {
    const { opts } = this;
    const approvals = this.channelOf(row.chat_jid)?.approvals;
    const text = decidedText(row);
    if (row.platform_id === null || !approvals) {
      guard(opts.log, 'telling the decision', () => this.outbound(row, text));
      return;
    }
    // The question stays as it was asked, its commands and buttons replaced by how it ended.
    const target = this.targetOf(row.chat_jid)!;
    const edited = opsText(decidedQuestionText(row, target), target);
    // The decision's row first, as for the question.
    void Promise.resolve(committed(opts.db))
      .then(() => approvals.decided(row.chat_jid, row.platform_id!, edited))
      .catch((err: unknown) => {
        opts.log.warn({ code: row.code, err: coerceError(err).message }, 'editing the approval failed');
        return whenWritable(opts.db, () =>
          guard(opts.log, 'telling the decision', () => this.outbound(row, text)),
        );
      })
      .catch((err: unknown) =>
        opts.log.error({ err: coerceError(err).message }, 'telling the decision failed'),
      );
  }

  /**
   * The whole input of a question that could show only its head and tail, as a text file under it (best
   * effort: the dashboard's approvals page shows it too).
   */
  private sendWhole(row: ToolApproval, whole: string, questionId: string): void {
    const ch = this.channelOf(row.chat_jid);
    if (!ch?.sendFile) return;
    const file = {
      messageId: 0,
      chatJid: row.chat_jid,
      part: 0,
      parts: 1,
      replyTo: questionId,
      topic: row.topic,
      previousPartId: null,
      kind: 'status',
      path: `input-${row.code}.txt`,
      data: Buffer.from(whole, 'utf8'),
      name: `input-${row.code}.txt`,
      mime: 'text/plain',
      as: 'document' as const,
    };
    ch.sendFile(file).catch((err: unknown) =>
      this.opts.log.warn({ code: row.code, err: coerceError(err).message }, 'sending the whole input failed'),
    );
  }

  /** What a question in this chat is written for: its channel's dialect and the buttons message's limit. */
  private targetOf(jid: string): QuestionTarget | undefined {
    const ch = this.channelOf(jid);
    if (!ch) return undefined;
    return { limit: ch.approvals?.limit ?? ch.limit, limitUnit: ch.limitUnit, textFormat: ch.textFormat };
  }

  private channelOf(jid: string): Channel | undefined {
    const platform = parseJid(jid).platform;
    return this.opts.channels.find((c) => c.platform === platform);
  }

  private outbound(row: ToolApproval, content: string): number {
    const id = insertOutbound(this.opts.db, {
      chat_jid: row.chat_jid,
      content,
      kind: 'status',
      topic: row.topic,
    });
    this.opts.signals.outbound.fire(id);
    return id;
  }

  private plain(row: ToolApproval): void {
    // Markdown, as any answer: delivery writes it in the channel's dialect and splits it at its limit.
    const ch = this.channelOf(row.chat_jid);
    const target: QuestionTarget = {
      limit: Math.max(ch?.limit ?? PLAIN_LIMIT, PLAIN_LIMIT),
      limitUnit: ch?.limitUnit ?? 'chars',
      textFormat: 'markdown',
    };
    const id = this.opts.db.transaction(() => {
      const out = this.outbound(row, questionText(row, target).text);
      this.store.asked(row.id, null, out);
      return out;
    })();
    this.opts.log.info({ code: row.code, outbound: id }, 'approval asked as a message');
  }
}

function guard(log: Logger, what: string, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    log.error({ err: coerceError(err).message }, `${what} failed`);
  }
}
