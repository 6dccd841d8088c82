import type { Db } from './db.js';

/**
 * A group's daily limits (docs/ACCESS.md, "Limits") against what its runs used since the UTC day began.
 * Every run of the group counts, however it started: a member's message, a task, a delegation or the answer
 * of one (docs/SECURITY.md). The access step asks before a message is served; the action applier asks before it
 * places a delegation or its answer in a session.
 */

/** The daily part of a group's `limits` row; null is no limit. */
export interface DailyLimits {
  runsPerDay: number | null;
  costPerDayUsd: number | null;
}

/** A daily limit a group has reached: which one, the window it counts in (epoch ms), and how to say it. */
export interface LimitHit {
  kind: 'runs' | 'cost';
  window: number;
  text: string;
}

const DAY = 86_400_000;

function prepare(db: Db) {
  return {
    runs: db.prepare('SELECT count(*) FROM session_log WHERE group_folder = ? AND started_at >= ?').pluck(),
    cost: db
      .prepare(
        'SELECT coalesce(sum(cost_usd), 0) FROM session_log WHERE group_folder = ? AND started_at >= ?',
      )
      .pluck(),
    limits: db.prepare('SELECT runs_per_day, cost_per_day_usd FROM limits WHERE group_folder = ?'),
  };
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
    const row = this.s.limits.get(folder) as
      { runs_per_day: number | null; cost_per_day_usd: number | null } | undefined;
    return row && { runsPerDay: row.runs_per_day, costPerDayUsd: row.cost_per_day_usd };
  }

  /** The first daily limit of `folder` its runs have reached today (UTC), or null. */
  reached(folder: string, limits: DailyLimits | undefined, now: number): LimitHit | null {
    if (!limits) return null;
    const day = Math.floor(now / DAY) * DAY;
    const since = new Date(day).toISOString();
    if (limits.runsPerDay !== null && (this.s.runs.get(folder, since) as number) >= limits.runsPerDay) {
      return { kind: 'runs', window: day, text: `${limits.runsPerDay} agent runs per day` };
    }
    if (limits.costPerDayUsd !== null && (this.s.cost.get(folder, since) as number) >= limits.costPerDayUsd) {
      return { kind: 'cost', window: day, text: `$${limits.costPerDayUsd} of agent cost per day` };
    }
    return null;
  }
}
