import type { Db } from '../store/db.js';
import { dayOf, DailyUsage, type CapUse } from '../store/limits.js';
import { insertOutbound } from '../store/messages.js';
import type { Signals } from '../core/signals.js';
import type { BatchRow } from '../store/queue.js';
import type { BudgetGuard } from './budget-asks.js';
import type { Run } from './run.js';

/**
 * The daily caps while a run spends (docs/COSTS.md): after each usage report, every cost or token cap of the
 * run's group and of the report's sender that is 80 % used is told to the run's chat, once per cap and UTC
 * day. The notice is a `limit_notices` row written in the report's own transaction with the chat's message,
 * so a restart (even kill -9) neither loses nor repeats it.
 */

/** The share of a cap at which the chat is warned. */
export const WARN_AT = 0.8;

function noticeStmt(db: Db) {
  return db.prepare(
    `INSERT INTO limit_notices (group_folder, sender, kind, window_start) VALUES (?, ?, ?, ?)
     ON CONFLICT DO NOTHING`,
  );
}

const stmts = new WeakMap<Db, ReturnType<typeof noticeStmt>>();

function describe(group: string, c: CapUse): string {
  const who = c.sender === '' ? group : `${c.sender} in ${group}`;
  const [used, cap] =
    c.kind === 'cost' ? [`$${c.used.toFixed(4)}`, `$${c.cap}`] : [`${c.used} tokens`, `${c.cap} tokens`];
  const pct = Math.floor((c.used / c.cap) * 100);
  return `Budget warning: ${who} has used ${pct} % of its daily agent ${c.kind} cap today (${used} of ${cap}).`;
}

/**
 * Warns the run's chat of each cap the group or `sender` crossed 80 % of today, once per (group or sender,
 * cap, day). Call inside the transaction that stored the report. Returns the outbound ids it wrote.
 */
export function warnCaps(db: Db, run: Run, sender: string | null, now: number): number[] {
  const group = run.key.group;
  const uses = new DailyUsage(db).capUses(group, sender, now);
  const ids: number[] = [];
  let insert = stmts.get(db);
  for (const c of uses) {
    if (c.cap <= 0 || c.used < WARN_AT * c.cap) continue;
    if (!insert) stmts.set(db, (insert = noticeStmt(db)));
    if (insert.run(group, c.sender, `warn-${c.kind}`, dayOf(now)).changes === 0) continue;
    ids.push(
      insertOutbound(db, {
        chat_jid: run.chatJid,
        kind: 'gateway',
        topic: run.key.topic,
        content: describe(group, c),
      }),
    );
  }
  return ids;
}

/** The next turn's pause point (Lane.feed takes it), and whether the run stopped and was closed. */
export interface FeedGate {
  (rows: readonly BatchRow[]): boolean;
  /** Closes the run once it is idle after it stopped over its budget; true when it did. */
  closeIfStopped(): boolean;
}

/**
 * The next turn's pause point: the rows go to the agent when the run is under its caps; while the approvers
 * are asked they wait (`wake` runs once decided); once the run stopped over its budget they are kept
 * `limited` (an operator may release them, docs/ACCESS.md) and the chat is told once. Undefined without an
 * ask broker.
 */
export function budgetGate(
  opts: { db: Db; asks?: { budget: BudgetGuard } | undefined },
  signals: Pick<Signals, 'outbound'>,
  run: Run,
  wake: () => void,
): FeedGate | undefined {
  const guard = opts.asks?.budget;
  if (!guard) return undefined;
  const db = opts.db;
  const gate = (rows: readonly BatchRow[]) => {
    const g = guard.gate(run, 'feed', wake);
    if (g.go) return true;
    if (g.stopped === null) return false;
    const reason = `limit: the run stopped over its budget (${g.stopped})`;
    const id = db.transaction(() => {
      const limit = db.prepare(
        `UPDATE messages SET state = 'limited', error = ? WHERE id = ? AND state = 'ready'`,
      );
      let n = 0;
      for (const r of rows) n += limit.run(reason, r.id).changes;
      if (n === 0) return null;
      return insertOutbound(db, {
        chat_jid: run.chatJid,
        kind: 'gateway',
        topic: run.key.topic,
        content: `Not answered: ${g.stopped}. ${n} message${n === 1 ? ' is' : 's are'} kept for an operator to release.`,
      });
    })();
    if (id !== null) signals.outbound.fire(id);
    return false;
  };
  return Object.assign(gate, {
    closeIfStopped(): boolean {
      if (!guard.runs.has(run) || !guard.stopped(run) || !run.idle) return false;
      run.closeStdin('idle');
      return true;
    },
  });
}
