import type { ApprovalButton, Channel } from '../channels/channel.js';
import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { clipText } from '../core/text.js';
import { parseJid } from '../core/types.js';
import type { ApprovalNotifier } from '../queue/asks.js';
import type { Db } from '../store/db.js';
import { committed, flushGroup, whenWritable } from '../store/group-commit.js';
import { insertOutbound } from '../store/messages.js';
import { toolApprovalsOf, type ToolApproval } from '../store/tool-approvals.js';

/**
 * How a tool approval reaches its chat (docs/APPROVALS.md, docs/CHANNELS.md "Buttons"): one message naming
 * the tool, the summary and the code, with buttons where the channel has `approvals`; otherwise an outbound
 * row the outbox delivers like any answer. When the decision is made the message is edited to say who
 * decided (buttons gone), or, without buttons, a follow-up says it.
 */

/** What the notifier needs: the started channels and a way to wake delivery for outbound rows. */
export interface ApprovalNotifierOptions {
  db: Db;
  channels: () => readonly Channel[];
  log: Logger;
  /** An outbound row was written (its id). */
  onOutbound: (id: number) => void;
}

/** The text of the asking message. */
export function askText(row: ToolApproval): string {
  const what = row.summary ?? row.input_line;
  return [
    `The agent wants to run ${row.tool}: ${clipText(what, 600)}`,
    row.summary !== null ? `input: ${clipText(row.input_line, 300)}` : null,
    `/approve ${row.code} to allow it, /reject ${row.code} [note] to refuse.`,
  ]
    .filter((l): l is string => l !== null)
    .join('\n');
}

/** The text that says who decided. */
export function decidedText(row: ToolApproval): string {
  const head = `${row.tool} (${row.code}): `;
  if (row.state === 'approved') return `${head}approved by ${row.decided_by ?? 'someone'}`;
  if (row.state === 'expired') return `${head}not decided in time: denied (no decision)`;
  if (row.state === 'cancelled') return `${head}cancelled, ${row.note ?? 'its turn ended'}: not run`;
  return `${head}rejected by ${row.decided_by ?? 'someone'}${row.note ? `: ${row.note}` : ''}`;
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
    // The approval's row first: a crash before its commit would have a redone run ask again.
    Promise.resolve(committed(opts.db))
      .then(() => approvals.ask(row.chat_jid, askText(row), approvalButtons(row.code), row.topic))
      .then((platformId) =>
        // Durable now, as a delivered part is: the platform has the buttons, and the decision edits them.
        // Written once another process's write lock is had, off the event loop.
        whenWritable(opts.db, () => {
          this.store.asked(row.id, platformId, null);
          flushGroup(opts.db);
          const late = this.took(row);
          if (late) this.tell({ ...late, platform_id: platformId });
        }),
      )
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
    // The decision's row first, as for the question.
    void Promise.resolve(committed(opts.db))
      .then(() => approvals.decided(row.chat_jid, row.platform_id!, text))
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

  private channelOf(jid: string): Channel | undefined {
    const platform = parseJid(jid).platform;
    return this.opts.channels().find((c) => c.platform === platform);
  }

  private outbound(row: ToolApproval, content: string): number {
    const id = insertOutbound(this.opts.db, {
      chat_jid: row.chat_jid,
      content,
      kind: 'status',
      topic: row.topic,
    });
    this.opts.onOutbound(id);
    return id;
  }

  private plain(row: ToolApproval): void {
    const id = this.opts.db.transaction(() => {
      const out = this.outbound(row, askText(row));
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
