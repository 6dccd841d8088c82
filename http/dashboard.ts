import { Hono } from 'hono';
import {
  type RouteTable,
  explainFields,
  formatExplain,
  MATCH_KEYS,
  type ExplainLine,
} from '../router/index.js';
import type { Queries, RouteHitRow } from './queries.js';
import type { RouteSource } from '../store/routes.js';
import type { LaneInfo, StatusSnapshot } from './types.js';
import type { ClusterFacts } from '../core/metrics.js';
import type { Channel } from '../channels/channel.js';
import { platformRow } from '../core/platforms.js';
import { WorktreeStore } from '../store/worktrees.js';
import { aheadBehind } from '../worktrees/remove.js';
import { usageOf } from '../store/usage.js';
import { DAY, DailyUsage, dayOf, listSenderLimits } from '../store/limits.js';

/** What the dashboard's read endpoints need. */
export interface DashboardDeps {
  q: Queries;
  status: () => StatusSnapshot;
  /** The live routing table, recompiled only when routes change (the gateway's own RouteSource). */
  routes: Pick<RouteSource, 'table'>;
  now: () => number;
  /** Where agents ran (the cluster panel); absent: the endpoint answers with no nodes. */
  cluster?: () => ClusterFacts;
  /** The channels that started (the channels panel); absent: none. */
  channels?: () => readonly Channel[];
}

/** What the dashboard says about one started channel: whether it is connected and what it can do. */
export interface ChannelFacts {
  platform: string;
  /** Knows who its bot is (false: still trying to reach the platform); null: the channel has no bot. */
  connected: boolean | null;
  /** Receives the platform's pushes at `/hooks/<platform>`. */
  webhook: boolean;
  drafts: boolean;
  typing: boolean;
  buttons: boolean;
  files: boolean;
  reactions: boolean;
  /** Longest part, in `unit`s. */
  limit: number;
  unit: 'chars' | 'graphemes';
}

/**
 * The facts of one channel: what its platform can do from its row (core/platforms.ts, which the channel
 * conformance suite holds every channel to), whether it is connected and takes webhooks from the channel
 * itself. A channel of a platform without a row (a test's, the benchmark's) says what it implements.
 */
export function channelFacts(ch: Channel): ChannelFacts {
  const identity = 'identity' in ch ? (ch as { identity?: unknown }).identity : null;
  const row = platformRow(ch.platform) ?? {
    drafts: ch.drafts !== undefined,
    typing: ch.typing !== undefined,
    buttons: ch.approvals !== undefined,
    files: ch.sendFile !== undefined && ch.fetchAttachment !== undefined,
    reactions: ch.react !== undefined,
    limit: ch.limit,
    limitUnit: ch.limitUnit,
  };
  return {
    platform: ch.platform,
    connected: identity === null ? null : identity !== undefined,
    webhook: ch.webhook !== undefined,
    drafts: row.drafts,
    typing: row.typing,
    buttons: row.buttons,
    files: row.files,
    reactions: row.reactions,
    limit: row.limit,
    unit: row.limitUnit,
  };
}

/** A route as the dashboard shows it. `reason` is set for invalid rows and for fallen-back impulse configs. */
export interface DashboardRoute extends RouteHitRow {
  valid: boolean;
  reason: string | null;
}

/** One explain verdict, flattened for the page. */
export interface ExplainRow {
  id: number;
  seq: number;
  match: string;
  target: string;
  verdict: ExplainLine['verdict'];
  detail: string;
}

function explainRow(l: ExplainLine): ExplainRow {
  const base = { id: l.row.id, seq: l.row.seq, match: l.row.match, target: l.row.target, verdict: l.verdict };
  switch (l.verdict) {
    case 'matched':
      return { ...base, detail: `takes the message → ${l.target}` };
    case 'shadowed':
      return { ...base, detail: 'would match, but an earlier row already did' };
    case 'no-match':
      return { ...base, detail: `${l.key}='${l.value}' does not match '${l.glob}'` };
    case 'invalid':
      return { ...base, detail: `invalid (never matches): ${l.reason}` };
  }
}

/** The routes table with validity, reasons and hit counts, in (seq, id) order. */
export function dashboardRoutes(q: Queries, table: RouteTable): DashboardRoute[] {
  const rows = q.routes();
  const invalid = new Set(table.invalidRows.map((r) => r.row.id));
  const reasons = new Map<number, string>();
  for (const p of table.problems()) if (!reasons.has(p.id)) reasons.set(p.id, p.reason);
  return rows.map((r) => ({
    ...r,
    valid: !invalid.has(r.id),
    reason: reasons.get(r.id) ?? null,
    // route_hits is written by the pipeline in each batch's transaction.
    hits: r.hits,
  }));
}

function withAge(now: number) {
  return (l: LaneInfo) => ({
    ...l,
    age_ms: Math.max(0, now - l.since_ms),
    agent_age_ms: l.agent_started_ms === null ? null : Math.max(0, now - l.agent_started_ms),
  });
}

/** The dashboard's read-only JSON endpoints (mounted under /api/dashboard). */
export function dashboardRoutesApi(deps: DashboardDeps): Hono {
  const { q, status, now, routes, cluster, channels } = deps;
  const app = new Hono();

  app.get('/routes', (c) => c.json({ routes: dashboardRoutes(q, routes.table()) }));

  app.get('/explain', (c) => {
    // Same words as `gated routes explain KEY=VALUE…`, so page and CLI derive chat_jid/platform alike.
    const words: string[] = [];
    for (const key of MATCH_KEYS) {
      const v = c.req.query(key);
      if (v !== undefined && v !== '') words.push(`${key}=${v}`);
    }
    const fields = explainFields(words);
    if ('error' in fields) return c.json({ error: fields.error }, 400);
    const lines = routes.table().explain(fields);
    const hit = lines.find((l) => l.verdict === 'matched');
    return c.json({
      fields,
      lines: lines.map(explainRow),
      target: hit && hit.verdict === 'matched' ? hit.target : null,
      text: formatExplain(lines),
    });
  });

  app.get('/groups', (c) => c.json({ groups: q.groups() }));

  app.get('/channels', (c) => c.json({ channels: (channels?.() ?? []).map(channelFacts) }));

  app.get('/lanes', (c) => {
    const t = now();
    const { active, waiting } = status().lanes;
    return c.json({ now: t, active: active.map(withAge(t)), waiting: waiting.map(withAge(t)) });
  });

  app.get('/held', (c) => {
    const t = now();
    return c.json({ held: status().held.map((h) => ({ ...h, age_ms: Math.max(0, t - h.oldest_ms) })) });
  });

  app.get('/cluster', (c) =>
    c.json(cluster ? cluster() : ({ nodes: [], lanesActive: 0, lanesWaiting: 0 } satisfies ClusterFacts)),
  );

  app.get('/runs', (c) => {
    const limit = Math.min(Math.max(Number(c.req.query('limit')) || 50, 1), 500);
    return c.json({ runs: q.recentRuns(limit) });
  });

  // The topics' worktrees of groups bound to a repository (docs/WORKTREES.md), as `gated worktrees list`.
  app.get('/worktrees', async (c) => {
    const store = new WorktreeStore(q.db);
    const rows = await Promise.all(
      store.worktrees().map(async (w) => {
        const repo = store.repo(w.group_folder);
        const ab = repo ? await aheadBehind(repo.git_dir, repo.branch, w.branch) : null;
        return { ...w, base: repo?.branch ?? null, ahead: ab?.ahead ?? null, behind: ab?.behind ?? null };
      }),
    );
    return c.json({ repos: store.repos(), worktrees: rows });
  });

  // Usage per UTC day, group and sender (docs/COSTS.md), as `gated usage`, with the daily limits of the
  // groups and their senders and what each used today: the usage panel's charts and table.
  app.get('/usage', (c) => c.json(usageView(q.db, Number(c.req.query('days')) || 14, now())));

  app.get('/outbox', (c) => {
    const rows = q.outbox(500);
    return c.json({
      pending: rows.filter((r) => r.delivery === 'pending'),
      failed: rows.filter((r) => r.delivery === 'failed'),
    });
  });

  return app;
}

/** One daily cap row of the usage panel: a group's own (sender null) or a sender_limits row, with today's use. */
export interface UsageLimitRow {
  group: string;
  /** null: the group's own limits; '*': every sender without a row of their own (no single use today). */
  sender: string | null;
  runs_per_day: number | null;
  cost_per_day_usd: number | null;
  tokens_per_day: number | null;
  today: { runs: number; cost: number; tokens: number } | null;
}

/** What GET /api/dashboard/usage answers: `days` UTC days up to today, their rows, and the caps. */
export function usageView(db: Queries['db'], rawDays: number, now: number) {
  const days = Math.min(Math.max(Math.floor(rawDays), 1), 90);
  const since = dayOf(now) - (days - 1) * DAY;
  const dayNames = Array.from({ length: days }, (_, i) =>
    new Date(since + i * DAY).toISOString().slice(0, 10),
  );
  const used = new DailyUsage(db);
  const groupLimits = db
    .prepare(
      `SELECT group_folder, runs_per_day, cost_per_day_usd, tokens_per_day FROM limits
       WHERE coalesce(runs_per_day, cost_per_day_usd, tokens_per_day) IS NOT NULL ORDER BY group_folder`,
    )
    .all() as Array<{
    group_folder: string;
    runs_per_day: number | null;
    cost_per_day_usd: number | null;
    tokens_per_day: number | null;
  }>;
  const limits: UsageLimitRow[] = [
    ...groupLimits.map((l) => ({ ...l, sender: null as string | null })),
    ...listSenderLimits(db),
  ]
    .sort((a, b) => a.group_folder.localeCompare(b.group_folder))
    .map((l) => ({
      group: l.group_folder,
      sender: l.sender,
      runs_per_day: l.runs_per_day,
      cost_per_day_usd: l.cost_per_day_usd,
      tokens_per_day: l.tokens_per_day,
      today: l.sender === '*' ? null : used.usedToday(l.group_folder, l.sender, now),
    }));
  return { days: dayNames, rows: usageOf(db).byDay(since, null), limits, prices: usageOf(db).prices() };
}
