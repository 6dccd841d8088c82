import { AccessSource, listMembers, type AccessMode, type Limits, type MemberRow } from './access.js';
import { ApprovalStore, type Approval } from './approvals.js';
import type { Db } from './db.js';
import { listSenderLimits } from './limits.js';

/** One group as `gated access list` and the dashboard show it. */
export interface GroupAccess {
  folder: string;
  mode: AccessMode;
  /** The folder whose member rows apply (itself, an ancestor, or null when none do). */
  rulesFrom: string | null;
  /** The group's own member rows (an inheriting child has none). */
  members: MemberRow[];
  limits: Limits | null;
  usage: {
    runsToday: number;
    costTodayUsd: number;
    /** The sender with the most served messages this hour, and how many. */
    busiestSender: { sender: string; messages: number } | null;
  };
  /** Inbound rows of the last 24 hours by what access decided. */
  decisions: { served: number; denied: number; pending: number; limited: number };
  /** Pairing codes of the last 24 hours by outcome (open counts only unexpired ones). */
  codes: { open: number; approved: number; rejected: number };
}

/** Everything about access at `now`: per group, and the open codes. */
export interface AccessReport {
  admins: string[];
  groups: GroupAccess[];
  open: Approval[];
}

/** One group's inbound rows of the last 24 hours with one state and sender, and whether of this hour. */
interface RecentRow {
  folder: string;
  state: string | null;
  thisHour: 0 | 1;
  sender: string;
  n: number;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Builds the access report (one group when `only` is given). Read-only. */
export function accessReport(db: Db, admins: string[], now: number, only?: string): AccessReport {
  const source = new AccessSource(db, admins);
  const dayIso = new Date(Math.floor(now / DAY) * DAY).toISOString();
  const hourIso = new Date(Math.floor(now / HOUR) * HOUR).toISOString();
  const since24 = new Date(now - DAY).toISOString();
  const folders = (
    db.prepare('SELECT folder FROM registered_groups ORDER BY folder').pluck().all() as string[]
  ).filter((f) => only === undefined || f === only);
  const runs = db.prepare(
    'SELECT count(*) AS runs, coalesce(sum(cost_usd), 0) AS cost FROM session_log WHERE group_folder = ? AND started_at >= ?',
  );
  // The inbound rows of the last 24 hours, read once for all groups through the time index (no index
  // leads with the group: keeping one costs every routed row a write, issue 30).
  const recent = db
    .prepare(
      `SELECT group_folder AS folder, state, timestamp >= @hour AS thisHour,
              substr(chat_jid, 1, instr(chat_jid, ':')) || sender AS sender, count(*) AS n
       FROM messages INDEXED BY idx_messages_time
       WHERE timestamp >= @since AND is_from_me = 0 AND group_folder IS NOT NULL
       GROUP BY 1, 2, 3, 4`,
    )
    .all({ since: since24, hour: hourIso }) as RecentRow[];
  const decisionsOf = new Map<string, GroupAccess['decisions']>();
  const busiestOf = new Map<string, { sender: string; messages: number }>();
  const senders = new Map<string, number>();
  for (const r of recent) {
    let d = decisionsOf.get(r.folder);
    if (!d) decisionsOf.set(r.folder, (d = { served: 0, denied: 0, pending: 0, limited: 0 }));
    const withheld = r.state === 'denied' || r.state === 'pending' || r.state === 'limited';
    if (withheld) d[r.state as 'denied' | 'pending' | 'limited'] += r.n;
    else d.served += r.n;
    if (withheld || !r.thisHour) continue;
    // The same sender can come in several rows (one per state): add them up first.
    const key = `${r.folder}\n${r.sender}`;
    senders.set(key, (senders.get(key) ?? 0) + r.n);
  }
  for (const [key, messages] of senders) {
    const [folder, sender] = key.split('\n') as [string, string];
    const best = busiestOf.get(folder);
    if (!best || messages > best.messages || (messages === best.messages && sender < best.sender))
      busiestOf.set(folder, { sender, messages });
  }
  const codes = db.prepare(
    `SELECT CASE WHEN state = 'open' AND expires_at <= ? THEN 'expired' ELSE state END AS s, count(*) AS n
     FROM approvals WHERE group_folder = ? AND created_at >= ? GROUP BY s`,
  );
  const groups = folders.map((folder): GroupAccess => {
    const r = runs.get(folder, dayIso) as { runs: number; cost: number };
    const decisions = decisionsOf.get(folder) ?? { served: 0, denied: 0, pending: 0, limited: 0 };
    const byCode = { open: 0, approved: 0, rejected: 0 };
    for (const c of codes.all(now, folder, now - DAY) as { s: string; n: number }[]) {
      if (c.s === 'open' || c.s === 'approved' || c.s === 'rejected') byCode[c.s] += c.n;
    }
    return {
      folder,
      mode: source.mode(folder),
      rulesFrom: source.ruleFolder(folder) ?? null,
      members: listMembers(db, folder),
      limits: source.limits(folder) ?? null,
      usage: {
        runsToday: r.runs,
        costTodayUsd: r.cost,
        busiestSender: busiestOf.get(folder) ?? null,
      },
      decisions,
      codes: byCode,
    };
  });
  const open = new ApprovalStore(db).open(now).filter((a) => only === undefined || a.group_folder === only);
  return { admins, groups, open };
}

/** The report as text lines (`gated access list`). */
export function accessOverview(db: Db, admins: string[], now: number, only?: string): string[] {
  const rep = accessReport(db, admins, now, only);
  const out: string[] = [];
  out.push(`admins (owners everywhere): ${rep.admins.length ? rep.admins.join(', ') : 'none'}`);
  out.push('');
  out.push(['group', 'mode', 'rules from', 'limits', 'usage', 'last 24 h'].join('\t'));
  for (const g of rep.groups) {
    const l = g.limits;
    const limits = l
      ? [
          l.senderPerHour !== null ? `${l.senderPerHour}/sender/h` : '',
          l.runsPerDay !== null ? `${l.runsPerDay} runs/day` : '',
          l.costPerDayUsd !== null ? `$${l.costPerDayUsd}/day` : '',
          l.tokensPerDay != null ? `${l.tokensPerDay} tokens/day` : '',
        ]
          .filter(Boolean)
          .join(', ')
      : 'none';
    const u = g.usage;
    const usage =
      `${u.runsToday} runs, $${u.costTodayUsd.toFixed(2)} today` +
      (u.busiestSender ? `; ${u.busiestSender.sender} ${u.busiestSender.messages} msgs this hour` : '');
    const d = g.decisions;
    const c = g.codes;
    const decided =
      `served ${d.served}, denied ${d.denied}, pending ${d.pending}, limited ${d.limited}; ` +
      `codes approved ${c.approved}, rejected ${c.rejected}, open ${c.open}`;
    out.push([g.folder, g.mode, g.rulesFrom ?? '-', limits, usage, decided].join('\t'));
  }
  out.push('');
  out.push(['members:', 'id', 'group', 'sender', 'role', 'note'].join('\t'));
  // Every row, also those of folders that are only parents (`krons` for `krons/content`).
  for (const m of listMembers(db, only))
    out.push(['', m.id, m.group_folder, m.sender, m.role, m.note ?? ''].join('\t'));
  out.push('');
  out.push(['sender limits:', 'group', 'sender', 'runs/day', 'cost/day', 'tokens/day'].join('\t'));
  for (const r of listSenderLimits(db, only)) {
    const v = (n: number | null) => (n === null ? 'none' : String(n));
    out.push(
      ['', r.group_folder, r.sender, v(r.runs_per_day), v(r.cost_per_day_usd), v(r.tokens_per_day)].join(
        '\t',
      ),
    );
  }
  out.push('');
  out.push(['open codes:', 'code', 'group', 'sender', 'chat', 'expires'].join('\t'));
  for (const a of rep.open) {
    out.push(
      ['', a.code, a.group_folder, a.sender, a.chat_jid, new Date(a.expires_at).toISOString()].join('\t'),
    );
  }
  return out;
}
