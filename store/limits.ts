import { UsageError } from '../core/errors.js';
import { isValidFolder } from '../core/types.js';
import type { Db } from './db.js';

/**
 * The daily limits (docs/ACCESS.md, "Limits"; docs/COSTS.md) of a group and of each of its senders, against
 * what was used since the UTC day began. Every run of the group counts toward the group's, however it
 * started: a member's message, a task, a delegation or the answer of one (docs/SECURITY.md). A sender's
 * count their own: the runs that answered a message of theirs, and the usage reports credited to them. The
 * access step asks before a message is served; the action applier asks before it places a delegation or its
 * answer in a session; the recorder compares every usage report with the caps (the 80 % warning).
 */

/** The daily part of a group's `limits` row, or a `sender_limits` row; null is no limit. */
export interface DailyLimits {
  runsPerDay: number | null;
  costPerDayUsd: number | null;
  tokensPerDay?: number | null;
}

/** A daily limit reached: which one, the window it counts in (epoch ms), and how to say it. */
export interface LimitHit {
  kind: 'runs' | 'cost' | 'tokens';
  window: number;
  text: string;
}

/** What one scope (the group, or one sender of it) used today. */
export interface Used {
  runs: number;
  cost: number;
  tokens: number;
}

/** A cap of a scope and what the scope used of it today (the 80 % warning). */
export interface CapUse {
  /** '' for the group's own cap, else the sender's (`platform:id`). */
  sender: string;
  kind: 'cost' | 'tokens';
  cap: number;
  used: number;
}

export const DAY = 86_400_000;

/** The UTC day `now` is in, as epoch ms of its start. */
export function dayOf(now: number): number {
  return Math.floor(now / DAY) * DAY;
}

function prepare(db: Db) {
  return {
    runs: db.prepare('SELECT count(*) FROM session_log WHERE group_folder = ? AND started_at >= ?').pluck(),
    spent: db.prepare(
      `SELECT coalesce(sum(cost_usd), 0) AS cost,
         coalesce(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), 0) AS tokens
       FROM session_log WHERE group_folder = ? AND started_at >= ?`,
    ),
    limits: db.prepare(
      'SELECT runs_per_day, cost_per_day_usd, tokens_per_day FROM limits WHERE group_folder = ?',
    ),
    senderLimits: db.prepare(
      `SELECT runs_per_day, cost_per_day_usd, tokens_per_day FROM sender_limits
       WHERE group_folder = ? AND sender IN (?, '*') ORDER BY sender = '*' LIMIT 1`,
    ),
    anySenderLimits: db.prepare('SELECT 1 FROM sender_limits WHERE group_folder = ? LIMIT 1').pluck(),
    senderLimitGroups: db.prepare('SELECT DISTINCT group_folder FROM sender_limits').pluck(),
    // The runs that took a message of the sender today (a message is in one run at a time).
    senderRuns: db
      .prepare(
        `SELECT count(DISTINCT run_id) FROM messages
         WHERE is_from_me = 0 AND timestamp >= @since AND group_folder = @group AND sender = @id
           AND chat_jid >= @lo AND chat_jid < @hi AND run_id IS NOT NULL`,
      )
      .pluck(),
    senderSpent: db.prepare(
      `SELECT coalesce(sum(cost_usd), 0) AS cost, coalesce(sum(input_tokens + output_tokens), 0) AS tokens
       FROM usage_reports WHERE group_folder = ? AND sender = ? AND at >= ?`,
    ),
    granted: db
      .prepare(
        `SELECT coalesce(sum(amount), 0) FROM budget_grants
         WHERE group_folder = ? AND sender = ? AND kind = ? AND day = ?`,
      )
      .pluck(),
  };
}

type LimitRow = {
  runs_per_day: number | null;
  cost_per_day_usd: number | null;
  tokens_per_day: number | null;
};

function fromRow(row: LimitRow | undefined): DailyLimits | undefined {
  return (
    row && {
      runsPerDay: row.runs_per_day,
      costPerDayUsd: row.cost_per_day_usd,
      tokensPerDay: row.tokens_per_day,
    }
  );
}

const cache = new WeakMap<Db, ReturnType<typeof prepare>>();

/** The daily usage statements on one connection, prepared once. */
export class DailyUsage {
  private readonly s: ReturnType<typeof prepare>;

  constructor(db: Db) {
    let s = cache.get(db);
    if (!s) cache.set(db, (s = prepare(db)));
    this.s = s;
  }

  /** The group's daily limits as stored now, or undefined when it has no `limits` row. */
  limitsOf(folder: string): DailyLimits | undefined {
    return fromRow(this.s.limits.get(folder) as LimitRow | undefined);
  }

  /** The sender's daily limits in the group (their own row, else the group's `*` row), or undefined. */
  senderLimitsOf(folder: string, sender: string): DailyLimits | undefined {
    return fromRow(this.s.senderLimits.get(folder, sender) as LimitRow | undefined);
  }

  /** True when the group has any `sender_limits` row. */
  hasSenderLimits(folder: string): boolean {
    return this.s.anySenderLimits.get(folder) !== undefined;
  }

  /** The groups that have any `sender_limits` row. */
  senderLimitGroups(): Set<string> {
    return new Set(this.s.senderLimitGroups.all() as string[]);
  }

  /** The first daily limit of `folder` its runs have reached today (UTC), or null. */
  reached(folder: string, limits: DailyLimits | undefined, now: number): LimitHit | null {
    if (!limits) return null;
    return this.first(limits, dayOf(now), '', folder, () => this.groupUsed(folder, now));
  }

  /** The first daily limit `sender` (`platform:id`) has reached in `folder` today (UTC), or null. */
  senderReached(folder: string, sender: string, now: number): LimitHit | null {
    const limits = this.senderLimitsOf(folder, sender);
    if (!limits) return null;
    const hit = this.first(limits, dayOf(now), sender, folder, () => this.senderUsed(folder, sender, now));
    return hit && { ...hit, text: `${hit.text} per sender` };
  }

  /**
   * The cost and token caps of the group and of `sender` with what each used today (UTC), a granted budget
   * (budget_grants) added to its cap.
   */
  capUses(folder: string, sender: string | null, now: number): CapUse[] {
    const day = dayOf(now);
    const out: CapUse[] = [];
    const add = (scope: string, limits: DailyLimits | undefined, used: () => Used) => {
      if (!limits) return;
      let u: Used | undefined;
      for (const [kind, cap] of [
        ['cost', limits.costPerDayUsd],
        ['tokens', limits.tokensPerDay ?? null],
      ] as const) {
        if (cap === null) continue;
        u ??= used();
        const total = cap + (this.s.granted.get(folder, scope, kind, day) as number);
        out.push({ sender: scope, kind, cap: total, used: kind === 'cost' ? u.cost : u.tokens });
      }
    };
    add('', this.limitsOf(folder), () => this.groupUsed(folder, now));
    if (sender !== null)
      add(sender, this.senderLimitsOf(folder, sender), () => this.senderUsed(folder, sender, now));
    return out;
  }

  private first(
    limits: DailyLimits,
    day: number,
    scope: string,
    folder: string,
    used: () => Used,
  ): LimitHit | null {
    const u = used();
    const extra = (kind: string) => this.s.granted.get(folder, scope, kind, day) as number;
    if (limits.runsPerDay !== null && u.runs >= limits.runsPerDay) {
      return { kind: 'runs', window: day, text: `${limits.runsPerDay} agent runs per day` };
    }
    if (limits.costPerDayUsd !== null && u.cost >= limits.costPerDayUsd + extra('cost')) {
      return { kind: 'cost', window: day, text: `$${limits.costPerDayUsd} of agent cost per day` };
    }
    const tokens = limits.tokensPerDay ?? null;
    if (tokens !== null && u.tokens >= tokens + extra('tokens')) {
      return { kind: 'tokens', window: day, text: `${tokens} agent tokens per day` };
    }
    return null;
  }

  /** What the group (sender null) or one of its senders (`platform:id`) used today (UTC). */
  usedToday(folder: string, sender: string | null, now: number): Used {
    return sender === null ? this.groupUsed(folder, now) : this.senderUsed(folder, sender, now);
  }

  private groupUsed(folder: string, now: number): Used {
    const since = new Date(dayOf(now)).toISOString();
    const spent = this.s.spent.get(folder, since) as { cost: number; tokens: number };
    return { runs: this.s.runs.get(folder, since) as number, ...spent };
  }

  private senderUsed(folder: string, sender: string, now: number): Used {
    const day = dayOf(now);
    const colon = sender.indexOf(':');
    const platform = sender.slice(0, colon);
    const runs = this.s.senderRuns.get({
      since: new Date(day).toISOString(),
      group: folder,
      id: sender.slice(colon + 1),
      // The chats of the sender's platform: JIDs from `platform:` up to `platform;` (';' follows ':').
      lo: `${platform}:`,
      hi: `${platform};`,
    }) as number;
    const spent = this.s.senderSpent.get(folder, sender, day) as { cost: number; tokens: number };
    return { runs, ...spent };
  }
}

/** A sender's daily limits in a group (sender `*`: every sender without a row of their own). */
export interface SenderLimits {
  runsPerDay: number | null;
  costPerDayUsd: number | null;
  tokensPerDay: number | null;
}

/** Writes a sender's daily limits in a group (null clears one); a row with no limit left is deleted. */
export function setSenderLimits(db: Db, folder: string, sender: string, limits: SenderLimits): void {
  if (!isValidFolder(folder)) throw new UsageError(`bad group folder '${folder}'`);
  if (sender !== '*' && !/^[a-z][a-z0-9-]*:./.test(sender))
    throw new UsageError(`--sender must be platform:id (as in members) or '*', got '${sender}'`);
  if (limits.runsPerDay === null && limits.costPerDayUsd === null && limits.tokensPerDay === null) {
    db.prepare('DELETE FROM sender_limits WHERE group_folder = ? AND sender = ?').run(folder, sender);
    return;
  }
  db.prepare(
    `INSERT INTO sender_limits (group_folder, sender, runs_per_day, cost_per_day_usd, tokens_per_day)
     VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (group_folder, sender) DO UPDATE SET runs_per_day = excluded.runs_per_day,
       cost_per_day_usd = excluded.cost_per_day_usd, tokens_per_day = excluded.tokens_per_day`,
  ).run(folder, sender, limits.runsPerDay, limits.costPerDayUsd, limits.tokensPerDay);
}

/** A sender's own `sender_limits` row in a group (not the `*` row), or undefined. */
export function senderLimitsRow(db: Db, folder: string, sender: string): SenderLimits | undefined {
  const row = db
    .prepare(
      'SELECT runs_per_day, cost_per_day_usd, tokens_per_day FROM sender_limits WHERE group_folder = ? AND sender = ?',
    )
    .get(folder, sender) as
    | { runs_per_day: number | null; cost_per_day_usd: number | null; tokens_per_day: number | null }
    | undefined;
  return (
    row && {
      runsPerDay: row.runs_per_day,
      costPerDayUsd: row.cost_per_day_usd,
      tokensPerDay: row.tokens_per_day,
    }
  );
}

/** A `sender_limits` row as stored. */
export interface SenderLimitsRow {
  group_folder: string;
  sender: string;
  runs_per_day: number | null;
  cost_per_day_usd: number | null;
  tokens_per_day: number | null;
}

/** Every `sender_limits` row, of one group or all, by group and sender. */
export function listSenderLimits(db: Db, only?: string): SenderLimitsRow[] {
  return db
    .prepare(`SELECT * FROM sender_limits WHERE ? IS NULL OR group_folder = ? ORDER BY group_folder, sender`)
    .all(only ?? null, only ?? null) as SenderLimitsRow[];
}
