import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { describeDecision } from '../../gateway/access.js';
import {
  AccessSource,
  checkMode,
  removeMember,
  setAccessMode,
  setLimits,
  upsertMember,
  type Limits,
} from '../../store/access.js';
import { senderLimitsRow, setSenderLimits, type SenderLimits } from '../../store/limits.js';
import { ApprovalStore, releaseLimited } from '../../store/approvals.js';
import { listAudit, withActor } from '../../store/audit.js';
import type { Db } from '../../store/db.js';
import { accessOverview } from '../../store/access-report.js';
import { action, type CliContext } from '../context.js';

/** Who the audit trail names for changes made from this command line. */
export function cliActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return 'cli';
  }
}

/** Runs a change with the CLI user named in the audit trail. */
export function audited<T>(ctx: CliContext, fn: (db: Db) => T, opts?: { create?: boolean }): T {
  const db = ctx.db(opts);
  return withActor(db, cliActor(), () => fn(db));
}

/** A limit option: a positive number, or `none` to clear it. */
function limitArg(name: string, raw: string | undefined, integer: boolean): number | null | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'none') return null;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) {
    throw new UsageError(
      `${name} must be ${integer ? 'a whole number' : 'a number'} >= 0 or 'none', got '${raw}'`,
    );
  }
  return n;
}

/** `--since`: an ISO date or time, or a span back from now (`30m`, `12h`, `7d`). */
export function sinceArg(raw: string, now = Date.now()): string {
  const span = /^(\d+)([mhd])$/.exec(raw);
  if (span) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as 'm' | 'h' | 'd'];
    return new Date(now - Number(span[1]) * unit).toISOString();
  }
  const t = Date.parse(raw);
  if (!/^\d{4}-\d\d-\d\d/.test(raw) || Number.isNaN(t)) {
    throw new UsageError(
      `--since must be an ISO date (2026-11-23, 2026-11-23T10:00Z) or a span (30m, 12h, 7d), got '${raw}'`,
    );
  }
  return new Date(t).toISOString();
}

/** `gated access list | add | rm | mode | limit | approve | reject | release`. */
export function accessCommand(program: Command): void {
  const access = program
    .command('access')
    .description('who may reach each group: modes, members, pairing codes, limits (docs/ACCESS.md)');
  memberCommands(access);
  limitCommand(access);
  decisionCommands(access);
}

/** `gated access list | add | rm | mode`: who is in a group, and how its door is set. */
function memberCommands(access: Command): void {
  access
    .command('list')
    .description('groups with their mode, members, limits and usage, open codes, and decisions')
    .option('--group <folder>', 'only this group')
    .action(
      action((ctx, opts: { group?: string }) => {
        for (const line of accessOverview(
          ctx.db({ readOnly: true }),
          ctx.config.admins,
          Date.now(),
          opts.group,
        ))
          ctx.out(line);
      }),
    );

  access
    .command('add')
    .description('give a sender glob a role in a group (member by default); an existing row changes role')
    .argument('<group>', 'group folder, e.g. krons (children without rows of their own inherit it)')
    .argument('<sender>', 'platform:sender_id glob, e.g. telegram:12345 or discord:*')
    .option('--role <role>', 'owner | member | blocked', 'member')
    .option('--note <text>', 'why (kept on the row)')
    .action(
      action((ctx, group: string, sender: string, opts: { role: string; note?: string }) => {
        audited(ctx, (db) => upsertMember(db, group, sender, opts.role, opts.note));
        ctx.out(`${sender} is ${opts.role} of ${group}`);
      }),
    );

  access
    .command('rm')
    .description("remove a sender glob's row from a group")
    .argument('<group>')
    .argument('<sender>')
    .action(
      action((ctx, group: string, sender: string) => {
        if (!audited(ctx, (db) => removeMember(db, group, sender))) {
          throw new UsageError(`no member row '${sender}' in ${group}`);
        }
        ctx.out(`${sender} removed from ${group}`);
      }),
    );

  access
    .command('mode')
    .description("set a group's access mode")
    .argument('<group>')
    .argument('<mode>', 'open | members | approval')
    .action(
      action((ctx, group: string, mode: string) => {
        checkMode(mode);
        if (!audited(ctx, (db) => setAccessMode(db, group, mode)))
          throw new UsageError(`no group '${group}'`);
        ctx.out(`${group} is ${mode}`);
      }),
    );
}

/** `gated access limit`: a group's limits, or one sender's in it, the ones not named kept. */
function limitCommand(access: Command): void {
  access
    .command('limit')
    .description(
      "set a group's limits, or with --sender one sender's daily limits in it ('none' clears one; unnamed ones stay)",
    )
    .argument('<group>')
    .option('--sender <id>', "one sender's limits: platform:id as in members, or '*' for every sender")
    .option('--sender-per-hour <n>', 'messages one sender may send per hour (a group limit)')
    .option('--runs-per-day <n>', 'agent runs per day')
    .option('--cost-per-day <usd>', 'agent cost per day in USD')
    .option('--tokens-per-day <n>', 'agent tokens (input and output) per day')
    .action(
      action((ctx, group: string, opts: LimitOpts) => {
        if (opts.sender !== undefined) return senderLimit(ctx, group, opts.sender, opts);
        const current: Limits = new AccessSource(ctx.db(), []).limits(group) ?? {
          senderPerHour: null,
          runsPerDay: null,
          costPerDayUsd: null,
        };
        const next: Limits = {
          senderPerHour: pick(limitArg('--sender-per-hour', opts.senderPerHour, true), current.senderPerHour),
          runsPerDay: pick(limitArg('--runs-per-day', opts.runsPerDay, true), current.runsPerDay),
          costPerDayUsd: pick(limitArg('--cost-per-day', opts.costPerDay, false), current.costPerDayUsd),
          tokensPerDay: pick(
            limitArg('--tokens-per-day', opts.tokensPerDay, true),
            current.tokensPerDay ?? null,
          ),
        };
        audited(ctx, (db) => setLimits(db, group, next));
        ctx.out(
          `${group}: sender/hour ${next.senderPerHour ?? 'none'}, runs/day ${next.runsPerDay ?? 'none'}, ` +
            `cost/day ${next.costPerDayUsd ?? 'none'}, tokens/day ${next.tokensPerDay ?? 'none'}`,
        );
      }),
    );
}

interface LimitOpts {
  sender?: string;
  senderPerHour?: string;
  runsPerDay?: string;
  costPerDay?: string;
  tokensPerDay?: string;
}

/** `gated access limit GROUP --sender ID`: the sender's daily limits in the group. */
function senderLimit(ctx: CliContext, group: string, sender: string, opts: LimitOpts): void {
  if (opts.senderPerHour !== undefined)
    throw new UsageError('--sender-per-hour is a group limit: leave out --sender');
  const current: SenderLimits = senderLimitsRow(ctx.db(), group, sender) ?? {
    runsPerDay: null,
    costPerDayUsd: null,
    tokensPerDay: null,
  };
  const next: SenderLimits = {
    runsPerDay: pick(limitArg('--runs-per-day', opts.runsPerDay, true), current.runsPerDay),
    costPerDayUsd: pick(limitArg('--cost-per-day', opts.costPerDay, false), current.costPerDayUsd),
    tokensPerDay: pick(limitArg('--tokens-per-day', opts.tokensPerDay, true), current.tokensPerDay),
  };
  audited(ctx, (db) => setSenderLimits(db, group, sender, next));
  ctx.out(
    `${group} ${sender}: runs/day ${next.runsPerDay ?? 'none'}, cost/day ${next.costPerDayUsd ?? 'none'}, ` +
      `tokens/day ${next.tokensPerDay ?? 'none'}`,
  );
}

/** `gated access approve | reject | release`: deciding pairing codes, releasing limited messages. */
function decisionCommands(access: Command): void {
  for (const approve of [true, false]) {
    access
      .command(approve ? 'approve' : 'reject')
      .description(
        approve
          ? "let a pairing code's sender in: a member row, and their pending messages go to the agent"
          : "turn a pairing code's sender away: their pending messages are denied",
      )
      .argument('<code>')
      .action(
        action((ctx, code: string) => {
          const actor = cliActor();
          const db = ctx.db();
          const d = withActor(db, actor, () =>
            new ApprovalStore(db).decide(code, approve, actor, Date.now()),
          );
          if (!d.ok) throw new UsageError(describeDecision(d, approve));
          ctx.out(describeDecision(d, approve));
        }),
      );
  }

  access
    .command('release')
    .description("put a chat's limited messages back: they go to the agent past the limits")
    .argument('<chat_jid>', 'the chat, e.g. telegram:-5075870332')
    .action(
      action((ctx, chat: string) => {
        const n = audited(ctx, (db) => releaseLimited(db, chat, Date.now()));
        ctx.out(`${n} message${n === 1 ? '' : 's'} of ${chat} released`);
      }),
    );
}

function pick<T>(given: T | undefined, current: T): T {
  return given === undefined ? current : given;
}

/** `gated audit [--since]`. */
export function auditCommand(program: Command): void {
  program
    .command('audit')
    .description('changes of routes, groups, members, limits and approvals: who, when, before, after')
    .option('--since <when>', 'ISO date or time, or a span back from now (30m, 12h, 7d)')
    .option('--limit <n>', 'at most this many rows, newest first', '200')
    .action(
      action((ctx, opts: { since?: string; limit: string }) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1)
          throw new UsageError(`--limit must be a whole number >= 1, got '${opts.limit}'`);
        const rows = listAudit(ctx.db({ readOnly: true }), {
          ...(opts.since ? { since: sinceArg(opts.since) } : {}),
          limit,
        });
        ctx.out(['id', 'at', 'actor', 'what', 'key', 'before', 'after'].join('\t'));
        for (const r of rows) {
          ctx.out(
            [
              r.id,
              r.at,
              r.actor,
              `${r.subject}.${r.action}`,
              r.row_key ?? '',
              r.before ?? '',
              r.after ?? '',
            ].join('\t'),
          );
        }
      }),
    );
}
