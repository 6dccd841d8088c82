import { UsageError } from '../core/errors.js';
import { platformRow } from '../core/platforms.js';
import { isValidFolder, parentFolder, threadModeOf, type ThreadMode } from '../core/types.js';
import { compileGlob, globError, isLiteral, type GlobTest } from '../router/index.js';
import { literalValue } from '../router/glob.js';
import {
  BARE_ADMIN_PLATFORMS,
  principalId,
  principalOf,
  type Principal,
  type SenderColumns,
} from './principal.js';
import type { Db } from './db.js';

/**
 * Who may reach a group's agent (docs/ACCESS.md): the groups' access modes, the `members` rows and the
 * `limits` rows, read and compiled once per change. The gateway decides with it before the impulse gate;
 * the queue asks it for each message's `sender_role`.
 */

/** A group's access mode: every sender, only senders with a role, or members plus pairing codes. */
export type AccessMode = 'open' | 'members' | 'approval';

/** A role in the `members` table. */
export type Role = 'owner' | 'member' | 'blocked';

/** What the agent is told about a message's sender. */
export type SenderRole = 'owner' | 'member' | 'guest' | 'system';

/**
 * The web chat's admin sender (`web:admin`): whoever presented GATED_ADMIN_TOKEN. Visitor ids gated issues
 * (`v` + hex digits) never take this form.
 */
export const WEB_ADMIN = 'admin';

export {
  BARE_ADMIN_PLATFORMS,
  principalId,
  principalOf,
  unauthenticatedWhy,
  type Principal,
  type SenderColumns,
} from './principal.js';

/** A group's limits; null is no limit. */
export interface Limits {
  senderPerHour: number | null;
  runsPerDay: number | null;
  costPerDayUsd: number | null;
  /** Agent tokens (input and output) of the group per day; absent or null is no limit. */
  tokensPerDay?: number | null;
}

/** One compiled `members` row. An invalid glob never matches (as an invalid route never does). */
export interface MemberRule {
  id: number;
  sender: string;
  role: Role;
  test: GlobTest;
  invalid: string | null;
}

/**
 * The member rows of one folder, split for speed: literal senders (the common case, and every row an
 * approval adds) in a map holding the strongest role per sender, wildcard globs in a list.
 */
export interface FolderRules {
  exact: ReadonlyMap<string, Role>;
  globs: readonly MemberRule[];
}

/**
 * Everything access reads per message, compiled together once per `access_version`, and the one other
 * group setting the gateway reads per message (what a platform thread is to the group): registered_groups
 * bumps the version on every change, so it is read with the modes instead of once per message.
 */
export interface AccessSnapshot {
  version: string;
  modes: ReadonlyMap<string, AccessMode>;
  threads: ReadonlyMap<string, ThreadMode>;
  rules: ReadonlyMap<string, FolderRules>;
  limits: ReadonlyMap<string, Limits>;
}

const RANK: Record<Role, number> = { member: 1, owner: 2, blocked: 3 };

/** True for a task row (scheduled work the operator set up): access never applies to it. */
export function isTaskRow(msg: { sender: string; verb: string }): boolean {
  return msg.verb === 'task' || msg.sender.startsWith('task:');
}

/** A mode as stored; anything unknown counts as `members` so that a typo closes a group, never opens it. */
export function toMode(raw: string | null | undefined): AccessMode {
  if (raw === null || raw === undefined || raw === 'open') return 'open';
  return raw === 'approval' ? 'approval' : 'members';
}

/** Escapes glob metacharacters so that a sender id matches only itself. */
export function literalGlob(value: string): string {
  return value.replace(/[\\*?[\]]/g, '\\$&');
}

const never: GlobTest = () => false;

/**
 * The live access rules of a running gated. Triggers bump router_state 'access_version' on every change to
 * members, limits or registered_groups, from any process; `current()` reads that one value and recompiles
 * only when it moved, so a sqlite3 edit applies on the next message without a per-message table read.
 */
export class AccessSource {
  private snap: AccessSnapshot | undefined;
  private readonly versionStmt;
  private readonly groupsStmt;
  private readonly membersStmt;
  private readonly limitsStmt;
  private readonly admins: ReadonlySet<string>;

  /** `admins` are the GATED_ADMINS entries: `id` or `platform:id`; owners of every group. */
  constructor(db: Db, admins: readonly string[]) {
    this.admins = new Set(admins);
    this.versionStmt = db.prepare("SELECT value FROM router_state WHERE key = 'access_version'").pluck();
    this.groupsStmt = db.prepare('SELECT folder, access, threads FROM registered_groups');
    this.membersStmt = db.prepare('SELECT id, group_folder, sender, role FROM members ORDER BY id');
    this.limitsStmt = db.prepare(
      'SELECT group_folder, sender_per_hour, runs_per_day, cost_per_day_usd, tokens_per_day FROM limits',
    );
  }

  /** The rules as of the latest committed change. */
  current(): AccessSnapshot {
    const version = String(this.versionStmt.get() ?? '');
    if (this.snap?.version !== version) this.snap = this.compile(version);
    return this.snap;
  }

  /**
   * The rules when `version` is the 'access_version' the caller read with its rows (the queue's batch
   * statement reads it per row): the compiled rules without a read of their own while it has not moved;
   * else the latest ones.
   */
  at(version: string): AccessSnapshot {
    return this.snap?.version === version ? this.snap : this.current();
  }

  private compile(version: string): AccessSnapshot {
    const modes = new Map<string, AccessMode>();
    const threads = new Map<string, ThreadMode>();
    for (const g of this.groupsStmt.all() as { folder: string; access: string | null; threads: unknown }[]) {
      modes.set(g.folder, toMode(g.access));
      threads.set(g.folder, threadModeOf(g.threads));
    }
    const rules = new Map<string, { exact: Map<string, Role>; globs: MemberRule[] }>();
    for (const m of this.membersStmt.all() as {
      id: number;
      group_folder: string;
      sender: string;
      role: Role;
    }[]) {
      let folder = rules.get(m.group_folder);
      if (!folder) rules.set(m.group_folder, (folder = { exact: new Map(), globs: [] }));
      const invalid = globError(m.sender);
      if (!invalid && isLiteral(m.sender)) {
        const who = literalValue(m.sender);
        const had = folder.exact.get(who);
        if (!had || RANK[m.role] > RANK[had]) folder.exact.set(who, m.role);
        continue;
      }
      folder.globs.push({
        id: m.id,
        sender: m.sender,
        role: m.role,
        invalid,
        test: invalid ? never : compileGlob(m.sender),
      });
    }
    const limits = new Map<string, Limits>();
    for (const l of this.limitsStmt.all() as {
      group_folder: string;
      sender_per_hour: number | null;
      runs_per_day: number | null;
      cost_per_day_usd: number | null;
      tokens_per_day: number | null;
    }[]) {
      limits.set(l.group_folder, {
        senderPerHour: l.sender_per_hour,
        runsPerDay: l.runs_per_day,
        costPerDayUsd: l.cost_per_day_usd,
        tokensPerDay: l.tokens_per_day,
      });
    }
    return { version, modes, threads, rules, limits };
  }

  /** The group's access mode (`open` for a folder that is not registered: routing refuses those anyway). */
  mode(folder: string, snap = this.current()): AccessMode {
    return snap.modes.get(folder) ?? 'open';
  }

  /** What a platform thread is to the group (`topics` for a folder that is not registered). */
  threadMode(folder: string, snap = this.current()): ThreadMode {
    return snap.threads.get(folder) ?? 'topics';
  }

  /** The group's limits, if it has a row. */
  limits(folder: string, snap = this.current()): Limits | undefined {
    return snap.limits.get(folder);
  }

  /**
   * The folder whose `members` rows apply to `folder`: the folder itself when it has rows, else its nearest
   * ancestor that has (`krons/content` inherits from `krons`), else undefined.
   */
  ruleFolder(folder: string, snap = this.current()): string | undefined {
    const { rules } = snap;
    for (let f: string | undefined = folder; f; f = parentFolder(f)) if (rules.has(f)) return f;
    return undefined;
  }

  /**
   * True when the sender is one of GATED_ADMINS: by `platform:id`, or by a bare `id` on the platforms of
   * BARE_ADMIN_PLATFORMS. An unauthenticated sender never is. The web chat is the exception: its ids are
   * issued by gated, and its one admin is `web:admin`, whoever presented GATED_ADMIN_TOKEN
   * (http/identity.ts); no GATED_ADMINS entry makes a web visitor an admin.
   */
  isAdmin(p: Principal): boolean {
    if (platformRow(p.platform)?.senderIds === 'issued') return p.id === WEB_ADMIN;
    if (p.unauthenticated !== undefined || this.admins.size === 0) return false;
    return this.admins.has(principalId(p)) || (BARE_ADMIN_PLATFORMS.has(p.platform) && this.admins.has(p.id));
  }

  /**
   * True when the sender may reach the group's agent (§12): not blocked, and a member or owner unless the
   * group is open. Limits do not count: a sender over one is still someone the group answers.
   */
  mayReach(folder: string, p: Principal): boolean {
    const snap = this.current();
    const role = this.role(folder, p, snap);
    if (role === 'blocked') return false;
    return role !== undefined || this.mode(folder, snap) === 'open';
  }

  /**
   * The sender's role in the group, or undefined for a stranger. GATED_ADMINS are owners and cannot be
   * blocked; otherwise a matching `blocked` row wins over any `owner` or `member` row, and `owner` over
   * `member`, which a platform's own word (GitHub's author_association) also gives. An unauthenticated sender
   * is a stranger, or blocked when a row blocks the address it claims.
   */
  role(folder: string, p: Principal, snap = this.current()): Role | undefined {
    if (this.isAdmin(p)) return 'owner';
    const best = this.rowRole(folder, p, snap);
    if (best === 'blocked') return best;
    if (p.unauthenticated !== undefined) return undefined;
    return best ?? p.platformRole;
  }

  /** The strongest role the `members` rows that apply to `folder` give the sender's id. */
  private rowRole(folder: string, p: Principal, snap: AccessSnapshot): Role | undefined {
    const from = this.ruleFolder(folder, snap);
    if (!from) return undefined;
    const who = principalId(p);
    const rules = snap.rules.get(from)!;
    let best = rules.exact.get(who);
    if (best === 'blocked') return best;
    for (const r of rules.globs) {
      if (!r.test(who)) continue;
      if (r.role === 'blocked') return 'blocked';
      if (!best || RANK[r.role] > RANK[best]) best = r.role;
    }
    return best;
  }

  /**
   * What the agent is told about a message's sender in `folder` (docs/ACCESS.md, "Agents"). A row read with
   * its `access_version` (the queue's batch rows) is decided on the rules of that version, without a read.
   */
  senderRole(
    folder: string,
    msg: SenderColumns & { verb: string; access_version?: string | null },
  ): SenderRole {
    if (isTaskRow(msg)) return 'system';
    const snap =
      msg.access_version === undefined ? this.current() : this.at(String(msg.access_version ?? ''));
    const role = this.role(folder, principalOf(msg), snap);
    return role === 'owner' || role === 'member' ? role : 'guest';
  }
}

/** One `members` row as stored. */
export interface MemberRow {
  id: number;
  group_folder: string;
  sender: string;
  role: Role;
  note: string | null;
  added_at: string;
}

const ROLES: readonly Role[] = ['owner', 'member', 'blocked'];
const MODES: readonly AccessMode[] = ['open', 'members', 'approval'];

/** Refuses a bad role with a UsageError naming it. */
export function checkRole(role: string): Role {
  if (!(ROLES as readonly string[]).includes(role)) {
    throw new UsageError(`bad role '${role}': one of ${ROLES.join(', ')}`);
  }
  return role as Role;
}

/** Refuses a bad access mode with a UsageError naming it. */
export function checkMode(mode: string): AccessMode {
  if (!(MODES as readonly string[]).includes(mode)) {
    throw new UsageError(`bad access mode '${mode}': one of ${MODES.join(', ')}`);
  }
  return mode as AccessMode;
}

/** Refuses a malformed sender glob or one without `platform:`. */
export function checkSenderGlob(sender: string): string {
  const err = globError(sender);
  if (err) throw new UsageError(`bad sender glob '${sender}': ${err}`);
  if (!sender.includes(':')) {
    throw new UsageError(
      `bad sender '${sender}': write platform:sender_id, e.g. telegram:12345 or discord:*`,
    );
  }
  return sender;
}

/** Members rows, by group then id (one group when `folder` is given). */
export function listMembers(db: Db, folder?: string): MemberRow[] {
  return (
    folder === undefined
      ? db.prepare('SELECT * FROM members ORDER BY group_folder, id').all()
      : db.prepare('SELECT * FROM members WHERE group_folder = ? ORDER BY id').all(folder)
  ) as MemberRow[];
}

/** Adds (or changes the role of) a member row. Checks the folder, the glob and the role first. */
export function upsertMember(db: Db, folder: string, sender: string, role: string, note?: string): void {
  if (!isValidFolder(folder)) throw new UsageError(`bad group folder '${folder}'`);
  checkSenderGlob(sender);
  checkRole(role);
  db.prepare(
    `INSERT INTO members (group_folder, sender, role, note) VALUES (?, ?, ?, ?)
     ON CONFLICT (group_folder, sender) DO UPDATE SET role = excluded.role, note = coalesce(excluded.note, note)`,
  ).run(folder, sender, role, note ?? null);
}

/** Removes a member row; false when there was none. */
export function removeMember(db: Db, folder: string, sender: string): boolean {
  return (
    db.prepare('DELETE FROM members WHERE group_folder = ? AND sender = ?').run(folder, sender).changes > 0
  );
}

/** Sets a registered group's access mode; false when the group is not registered. */
export function setAccessMode(db: Db, folder: string, mode: string): boolean {
  checkMode(mode);
  return db.prepare('UPDATE registered_groups SET access = ? WHERE folder = ?').run(mode, folder).changes > 0;
}

/** Writes a group's limits (null clears one); a row with no limit left is deleted. */
export function setLimits(db: Db, folder: string, limits: Limits): void {
  if (!isValidFolder(folder)) throw new UsageError(`bad group folder '${folder}'`);
  const tokens = limits.tokensPerDay ?? null;
  if (
    limits.senderPerHour === null &&
    limits.runsPerDay === null &&
    limits.costPerDayUsd === null &&
    tokens === null
  ) {
    db.prepare('DELETE FROM limits WHERE group_folder = ?').run(folder);
    return;
  }
  db.prepare(
    `INSERT INTO limits (group_folder, sender_per_hour, runs_per_day, cost_per_day_usd, tokens_per_day)
     VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (group_folder) DO UPDATE SET sender_per_hour = excluded.sender_per_hour,
       runs_per_day = excluded.runs_per_day, cost_per_day_usd = excluded.cost_per_day_usd,
       tokens_per_day = excluded.tokens_per_day`,
  ).run(folder, limits.senderPerHour, limits.runsPerDay, limits.costPerDayUsd, tokens);
}
