import type { Message, ThreadMode } from '../core/types.js';
import { wallTime } from '../core/schedule.js';
import { platformRow } from '../core/platforms.js';
import {
  AccessSource,
  type AccessSnapshot,
  isTaskRow,
  principalId,
  principalOf,
  type Limits,
  type Principal,
} from '../store/access.js';
import {
  ApprovalStore,
  CODE_INTERVAL_MS,
  CODE_TTL_MS,
  MAX_OPEN_CODES,
  normalizeCode,
  type Decision,
} from '../store/approvals.js';
import { withActor } from '../store/audit.js';
import { CodeGuesses } from './code-guesses.js';
import type { Db } from '../store/db.js';
import { DailyUsage } from '../store/limits.js';

/**
 * The access decision (docs/ACCESS.md): after routing chose a group and before the impulse gate, may this
 * sender's message reach the group's agent? Runs inside the batch transaction, so the state it decides, the
 * pairing code it issues and the notice it writes commit with the rest of the batch.
 */

/** What becomes of one routed message. `notice` is told to the sender's chat when present. */
export type AccessVerdict =
  { state: 'serve' } | { state: 'denied' | 'pending' | 'limited'; reason: string; notice?: string };

const SERVE: AccessVerdict = { state: 'serve' };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The access decision with its statements prepared once. */
export class AccessGate {
  readonly approvals: ApprovalStore;
  /** Wrong codes per sender, for /approve and /reject (code-guesses.ts). */
  readonly guesses = new CodeGuesses();
  /** The rules for the poll batch in progress (see beginBatch); undefined outside one. */
  private snap: AccessSnapshot | undefined;
  /** Messages an approval let in during the batch in progress (their files are fetched now). */
  letIn = 0;
  /**
   * The groups with per-sender daily limits, read once per batch: every message asked it of its group
   * twice (`quiet`, then `decide`), two statements of the six a message cost in a burst.
   */
  private senderLimited: Set<string> | undefined;
  private readonly senderCountStmt;
  private readonly daily: DailyUsage;
  private readonly noticeStmt;

  constructor(
    private readonly db: Db,
    readonly source: AccessSource,
    /** The time zone notices give their times in (GATED_TZ). */
    private readonly tz = 'UTC',
  ) {
    this.approvals = new ApprovalStore(db);
    // Every message the sender sent the group this hour while it had the limit counts (rows are marked
    // `counted` when routed), limited ones included (a sender who keeps writing past the limit stays
    // limited until the window ends); denied and pending rows never reach a limit check. The partial index
    // of the counted rows covers the query; the rows of groups without the limit are not in it.
    this.senderCountStmt = db
      .prepare(
        // Counting stops at the limit: the cost is bounded by it, not by how much the sender wrote.
        `SELECT count(*) FROM (
           SELECT 1 FROM messages
           WHERE counted = 1 AND group_folder = @group AND sender = @id AND timestamp >= @since
             AND chat_jid >= @lo AND chat_jid < @hi
           LIMIT @limit)`,
      )
      .pluck();
    this.daily = new DailyUsage(db);
    this.noticeStmt = db.prepare(
      `INSERT INTO limit_notices (group_folder, sender, kind, window_start) VALUES (?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
    );
  }

  /**
   * Reads the rules once for a whole poll batch. The batch holds the write lock, so only the batch itself
   * can change them meanwhile, and the one thing in it that does (a decided code) drops this copy.
   */
  beginBatch(): void {
    this.snap = this.source.current();
    this.letIn = 0;
    this.senderLimited = this.daily.senderLimitGroups();
  }

  /** Ends the batch: later decisions read the rules again. */
  endBatch(): void {
    this.snap = undefined;
    this.senderLimited = undefined;
  }

  /** The group has a sender_limits row: read once per batch (the batch holds the write lock), else each time. */
  private hasSenderLimits(folder: string): boolean {
    if (this.snap === undefined || this.senderLimited === undefined)
      return this.daily.hasSenderLimits(folder);
    return this.senderLimited.has(folder);
  }

  /**
   * True when deciding a message for `folder` neither writes (a pairing code, a limit's notice) nor counts
   * the sender's rows: the group is not an approval group and has no limits, or the row is a task's.
   */
  quiet(msg: Message, folder: string): boolean {
    if (isTaskRow(msg)) return true;
    const snap = this.snap ?? this.source.current();
    return (
      this.source.mode(folder, snap) !== 'approval' &&
      this.source.limits(folder, snap) === undefined &&
      !this.hasSenderLimits(folder)
    );
  }

  /**
   * Whether a row of `msg`'s sender routed to `folder` now counts toward the group's messages per sender
   * per hour: the group has that limit (a task's row never counts). Only counted rows are indexed.
   */
  countsSenders(msg: Message, folder: string): boolean {
    if (isTaskRow(msg)) return false;
    return (this.source.limits(folder, this.snap ?? this.source.current())?.senderPerHour ?? null) !== null;
  }

  /** What a platform thread is to the group (registered_groups.threads), from the batch's snapshot. */
  threadMode(folder: string): ThreadMode {
    return this.source.threadMode(folder, this.snap ?? this.source.current());
  }

  /** Decides one message routed to `folder` (call inside the batch transaction). */
  decide(msg: Message, folder: string, now: number): AccessVerdict {
    // Scheduled tasks are the operator's own work: access never applies to them.
    if (isTaskRow(msg)) return SERVE;
    const { source } = this;
    const snap = this.snap ?? source.current();
    const p = principalOf(msg);
    const role = source.role(folder, p, snap);
    if (role === 'blocked') return { state: 'denied', reason: `${principalId(p)} is blocked in ${folder}` };
    if (role === 'owner') return SERVE;
    if (role === undefined) {
      const mode = source.mode(folder, snap);
      // An unauthenticated mail may talk to an open group, nothing more: no code (it could be anyone's).
      if (mode !== 'open' && p.unauthenticated !== undefined)
        return { state: 'denied', reason: `${principalId(p)} is not authenticated: ${p.unauthenticated}` };
      if (mode === 'members')
        return { state: 'denied', reason: `${principalId(p)} is not a member of ${folder}` };
      if (mode === 'approval') return this.pair(msg, p, folder, now);
    }
    const limits = source.limits(folder, snap);
    return limits || this.hasSenderLimits(folder) ? this.limit(p, folder, limits, now) : SERVE;
  }

  /** A stranger in an approval group: issue a code, or hold the message without one (docs/ACCESS.md). */
  private pair(msg: Message, p: Principal, folder: string, now: number): AccessVerdict {
    const who = principalId(p);
    // A stranger has at most one open code per group (a new one needs the last to be an hour old, when
    // it has expired), so the latest code says everything.
    const last = this.approvals.last(folder, who);
    if (last?.state === 'open' && last.expires_at > now) {
      return { state: 'pending', reason: `waiting for approval of code ${last.code}` };
    }
    if (last?.state === 'rejected' && now - (last.decided_at ?? 0) < CODE_INTERVAL_MS) {
      return { state: 'denied', reason: `rejected by ${last.decided_by ?? 'an owner'} within the hour` };
    }
    if (last && now - last.created_at < CODE_INTERVAL_MS) {
      return { state: 'pending', reason: 'held without a code: one code per sender per hour' };
    }
    if (this.approvals.openCount(folder, now) >= MAX_OPEN_CODES) {
      return { state: 'pending', reason: `held without a code: ${folder} has ${MAX_OPEN_CODES} open codes` };
    }
    // Addresses cost nothing to make up on one's own domain: a mail domain has one open code at a time.
    const domain =
      platformRow(p.platform)?.senderIds === 'claimed' ? p.id.slice(p.id.lastIndexOf('@')) : undefined;
    if (domain !== undefined && this.approvals.openForDomain(folder, p.platform, domain, now) > 0) {
      return { state: 'pending', reason: `held without a code: ${domain} already has an open code` };
    }
    const approval = withActor(this.db, `chat:${who}`, () =>
      this.approvals.issue({
        group_folder: folder,
        member_folder: this.source.ruleFolder(folder) ?? folder,
        chat_jid: msg.chat_jid,
        sender: who,
        sender_name: msg.sender_name,
        message_id: msg.id,
        created_at: now,
      }),
    );
    const minutes = Math.round(CODE_TTL_MS / 60_000);
    return {
      state: 'pending',
      reason: `waiting for approval of code ${approval.code}`,
      notice:
        `${folder} answers members only. Your pairing code is ${approval.code}: ask an owner to send ` +
        `/approve ${approval.code} (valid ${minutes} minutes). Your messages are kept until then.`,
    };
  }

  /** Limits: the first one exceeded makes the message `limited`; its sender is told once per window. */
  private limit(p: Principal, folder: string, limits: Limits | undefined, now: number): AccessVerdict {
    const hour = Math.floor(now / HOUR) * HOUR;
    let hit: { kind: string; window: number; text: string } | null = null;
    if (limits && limits.senderPerHour !== null) {
      const since = new Date(hour).toISOString();
      const n = this.senderCountStmt.get({
        group: folder,
        id: p.id,
        // The chats of the sender's platform: JIDs from `platform:` up to `platform;` (';' follows ':').
        lo: `${p.platform}:`,
        hi: `${p.platform};`,
        since,
        limit: limits.senderPerHour,
      }) as number;
      if (n >= limits.senderPerHour) {
        hit = { kind: 'sender', window: hour, text: `${limits.senderPerHour} messages per sender per hour` };
      }
    }
    hit ??= this.daily.reached(folder, limits, now);
    // The sender's own daily limits (sender_limits), noticed apart from the group's.
    const own = hit ? null : this.daily.senderReached(folder, principalId(p), now);
    if (own) hit = { ...own, kind: `sender-${own.kind}` };
    if (!hit) return SERVE;
    const reason = `limit: ${hit.text} in ${folder}`;
    const first = this.noticeStmt.run(folder, principalId(p), hit.kind, hit.window).changes > 0;
    if (!first) return { state: 'limited', reason };
    const until = wallTime(hit.window + (hit.kind === 'sender' ? HOUR : DAY), this.tz);
    return {
      state: 'limited',
      reason,
      notice: `Limit reached (${hit.text}); messages until ${until} are kept but not answered.`,
    };
  }

  /**
   * Why the sender may not steer the group's sessions (`/new`, `/stop`, `/ping` facts), or undefined when
   * they may: the same rule as for their messages, without limits (a blocked sender, or a stranger of a
   * `members` or `approval` group, may not reset or stop what members are doing).
   */
  refusal(msg: Message, folder: string): string | undefined {
    if (isTaskRow(msg)) return undefined;
    const snap = this.snap ?? this.source.current();
    const p = principalOf(msg);
    const role = this.source.role(folder, p, snap);
    if (role === 'blocked') return `${principalId(p)} is blocked in ${folder}`;
    if (role === undefined && this.source.mode(folder, snap) !== 'open') {
      return `${principalId(p)} is not a member of ${folder}`;
    }
    return undefined;
  }

  /**
   * `/approve CODE` or `/reject CODE` of a pairing code from a chat: only an owner of the code's group
   * (checked on the sender, not the chat) may decide. Returns the answer for the chat, or undefined when no
   * pairing code of that name is this sender's to decide (decideCode answers that, the same for a code that
   * exists and one that does not).
   */
  decideFromChat(msg: Message, typedCode: string, approve: boolean, now: number): string | undefined {
    const p = principalOf(msg);
    const code = normalizeCode(typedCode);
    const found = code === undefined ? undefined : this.approvals.get(code);
    if (!found || this.source.role(found.group_folder, p) !== 'owner') return undefined;
    const who = principalId(p);
    // The decision may add a member row: the rest of the batch must see it.
    this.snap = undefined;
    const result = withActor(this.db, `chat:${who}`, () =>
      this.approvals.decide(typedCode, approve, `chat:${who}`, now),
    );
    if (result.ok && approve) this.letIn += result.messages;
    return describeDecision(result, approve);
  }
}

/** One line saying what a decision did (chat answer, CLI output). */
export function describeDecision(d: Decision, approve: boolean): string {
  if (!d.ok) return `not ${approve ? 'approved' : 'rejected'}: ${d.reason}`;
  const a = d.approval;
  const n = `${d.messages} message${d.messages === 1 ? '' : 's'}`;
  return approve
    ? `approved ${a.sender} as a member of ${a.member_folder} (code ${a.code}); ${n} released`
    : `rejected ${a.sender} for ${a.group_folder} (code ${a.code}); ${n} denied`;
}
