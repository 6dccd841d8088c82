import type { Db } from '../../store/db.js';
import type { ChatApproval, ChatRow } from './map.js';

/**
 * The tool approvals shown in the web chat (docs/WEB.md, "Tool approvals"). The web chat has no platform
 * message to edit: a question is an outbound row like any answer (delivery/approvals.ts), and the decision a
 * follow-up row. Each such line carries the approval's state as it is in `tool_approvals` now, so a page
 * (live or reloaded) shows Approve and Reject on a pending question and who decided on a decided one.
 */

/** The follow-up that says who decided starts `TOOL (CODE): ` (delivery/approval-text.ts `decidedText`). */
const DECIDED_RE = /^(\S+) \(([A-Z0-9]{5})\): /;

interface ApprovalRow extends Omit<ChatApproval, 'asks'> {
  outbound_id: number | null;
}

/** Finds the approvals of chat lines, with statements prepared once. */
export class WebApprovalLookup {
  private readonly asked;
  private readonly byCode;

  constructor(db: Db) {
    this.asked = db.prepare<[string, number, number], ApprovalRow>(
      `SELECT outbound_id, code, tool, state, decided_by FROM tool_approvals
        WHERE chat_jid = ? AND outbound_id BETWEEN ? AND ?`,
    );
    this.byCode = db.prepare<[string, string], ApprovalRow>(
      `SELECT outbound_id, code, tool, state, decided_by FROM tool_approvals WHERE chat_jid = ? AND code = ?`,
    );
  }

  /** The approval each row asks or announces, by row id (rows of neither kind are absent). */
  of(chatJid: string, rows: readonly ChatRow[]): Map<number, ChatApproval> {
    const out = new Map<number, ChatApproval>();
    const status = rows.filter((r) => r.is_from_me && r.kind === 'status');
    if (status.length === 0) return out;
    const ids = status.map((r) => r.id);
    const byOutbound = new Map<number, ApprovalRow>();
    for (const a of this.asked.all(chatJid, Math.min(...ids), Math.max(...ids)))
      if (a.outbound_id !== null) byOutbound.set(a.outbound_id, a);
    for (const r of status) {
      const asked = byOutbound.get(r.id);
      const said = asked ? undefined : DECIDED_RE.exec(r.content);
      const a = asked ?? (said ? this.byCode.get(chatJid, said[2]!) : undefined);
      // A follow-up names its tool too: a reply that merely looks like one (other tool) is not matched.
      if (a && (asked || a.tool === said?.[1]))
        out.set(r.id, {
          code: a.code,
          tool: a.tool,
          state: a.state,
          decided_by: a.decided_by,
          asks: asked !== undefined,
        });
    }
    return out;
  }
}
