import { randomInt } from 'node:crypto';
import { parseJid } from '../core/types.js';
import { literalGlob } from './access.js';
import { RELEASED_WAIT } from './attachments.js';
import type { Db } from './db.js';
import { insertOutbound } from './messages.js';

/**
 * Pairing codes of `approval` groups (docs/ACCESS.md, "Approval"): issued to a stranger's first message,
 * decided by an owner with /approve or /reject (or `gated access approve|reject`, or the dashboard).
 */

/**
 * The code alphabet: A–Z and 2–9 without I, L and O, which readers confuse with 1 and 0 (31 symbols, so
 * 8 characters carry 39 bits: guessing one open code takes ~10^11 tries).
 */
export const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
/** Characters in a code. */
export const CODE_LENGTH = 8;
/** How long a code stays open. */
export const CODE_TTL_MS = 60 * 60 * 1000;
/** Open codes a group may have at once. */
export const MAX_OPEN_CODES = 3;
/** A stranger gets at most one new code per group in this time. */
export const CODE_INTERVAL_MS = 60 * 60 * 1000;

/** A new code from the CSPRNG. */
export function newCode(): string {
  let code = '';
  for (let i = 0; i < CODE_LENGTH; i += 1) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

/** A typed code in canonical form (case-insensitive, spaces and dashes ignored), or undefined if malformed. */
export function normalizeCode(typed: string): string | undefined {
  const code = typed.replace(/[\s-]/g, '').toUpperCase();
  if (code.length !== CODE_LENGTH) return undefined;
  for (const c of code) if (!CODE_ALPHABET.includes(c)) return undefined;
  return code;
}

/** One `approvals` row. */
export interface Approval {
  code: string;
  group_folder: string;
  member_folder: string;
  chat_jid: string;
  sender: string;
  sender_name: string | null;
  message_id: number | null;
  created_at: number;
  expires_at: number;
  state: 'open' | 'approved' | 'rejected';
  decided_by: string | null;
  decided_at: number | null;
}

/** What a decision did, or why it did nothing. */
export type Decision =
  { ok: true; approval: Approval; messages: number } | { ok: false; reason: string; approval?: Approval };

/** The approvals table with its statements prepared once (the pipeline uses it per stranger's message). */
export class ApprovalStore {
  private readonly getStmt;
  private readonly lastStmt;
  private readonly openCountStmt;
  private readonly insertStmt;
  private readonly decideStmt;
  private readonly memberStmt;
  private readonly releaseStmt;
  private readonly denyStmt;
  private readonly openListStmt;
  private readonly openDomainStmt;

  constructor(private readonly db: Db) {
    this.getStmt = db.prepare('SELECT * FROM approvals WHERE code = ?');
    this.lastStmt = db.prepare(
      'SELECT * FROM approvals WHERE group_folder = ? AND sender = ? ORDER BY created_at DESC LIMIT 1',
    );
    this.openCountStmt = db
      .prepare(`SELECT count(*) FROM approvals WHERE group_folder = ? AND state = 'open' AND expires_at > ?`)
      .pluck();
    // The open codes of one mail domain: senders `<platform>:…@domain` of a platform whose senders claim
    // their ids (idx_approvals_open narrows to the group's open codes, at most MAX_OPEN_CODES of them).
    this.openDomainStmt = db
      .prepare(
        `SELECT count(*) FROM approvals WHERE group_folder = ? AND state = 'open' AND expires_at > ?
           AND substr(sender, 1, length(?)) = ? AND lower(substr(sender, -length(?))) = lower(?)`,
      )
      .pluck();
    this.insertStmt = db.prepare(
      `INSERT INTO approvals (code, group_folder, member_folder, chat_jid, sender, sender_name, message_id,
                              created_at, expires_at)
       VALUES (@code, @group_folder, @member_folder, @chat_jid, @sender, @sender_name, @message_id,
               @created_at, @expires_at)
       ON CONFLICT (code) DO NOTHING`,
    );
    this.decideStmt = db.prepare(
      `UPDATE approvals SET state = @state, decided_by = @actor, decided_at = @now
       WHERE code = @code AND state = 'open' AND expires_at > @now`,
    );
    // An explicit approval makes the sender a member even over an exact row that blocked them since; an
    // owner row stays an owner row.
    this.memberStmt = db.prepare(
      `INSERT INTO members (group_folder, sender, role, note) VALUES (?, ?, 'member', ?)
       ON CONFLICT (group_folder, sender) DO UPDATE SET role = 'member' WHERE role <> 'owner'`,
    );
    // Released rows become held with no hold left, so the gateway's next tick releases their chats at once
    // (in this process or in a running gated, which hears the commit) and they run oldest first.
    const senderRows = `state = 'pending' AND group_folder = @group AND sender = @id
         AND substr(chat_jid, 1, length(@platform) + 1) = @platform || ':'`;
    this.releaseStmt = db.prepare(
      `UPDATE messages SET state = 'held', held_at = @now, max_hold_ms = 0, error = NULL, ${RELEASED_WAIT}
       WHERE ${senderRows}`,
    );
    this.denyStmt = db.prepare(`UPDATE messages SET state = 'denied', error = @error WHERE ${senderRows}`);
    this.openListStmt = db.prepare(
      `SELECT * FROM approvals WHERE state = 'open' AND expires_at > ? ORDER BY created_at`,
    );
  }

  /** A code's row. */
  get(code: string): Approval | undefined {
    return this.getStmt.get(code) as Approval | undefined;
  }

  /** The stranger's latest code in the group, whatever its state. */
  last(group: string, sender: string): Approval | undefined {
    return this.lastStmt.get(group, sender) as Approval | undefined;
  }

  /** Open codes of the group. */
  openCount(group: string, now: number): number {
    return this.openCountStmt.get(group, now) as number;
  }

  /** Open codes of the group whose sender, of `platform`, has an address ending with `domain` (`@example.test`). */
  openForDomain(group: string, platform: string, domain: string, now: number): number {
    const prefix = `${platform}:`;
    return this.openDomainStmt.get(group, now, prefix, prefix, domain, domain) as number;
  }

  /** Every open code, oldest first (dashboard, `gated access list`). */
  open(now: number): Approval[] {
    return this.openListStmt.all(now) as Approval[];
  }

  /** Issues a new code (a fresh one on the unlikely collision). */
  issue(a: Omit<Approval, 'code' | 'state' | 'decided_by' | 'decided_at' | 'expires_at'>): Approval {
    for (;;) {
      const row = { ...a, code: newCode(), expires_at: a.created_at + CODE_TTL_MS };
      if (this.insertStmt.run(row).changes > 0) return this.get(row.code)!;
    }
  }

  /**
   * Approves or rejects an open code (call inside a transaction, with the actor set for the audit).
   * Approve adds a `member` row for the sender in `member_folder` and releases the sender's pending rows of
   * the group, oldest first; reject marks them `denied`. Either way the stranger's chat is told. The caller
   * checked that `actor` may decide (an owner of the group, an operator).
   */
  decide(typedCode: string, approve: boolean, actor: string, now: number): Decision {
    const code = normalizeCode(typedCode);
    if (!code) return { ok: false, reason: `'${typedCode}' is not a pairing code` };
    const a = this.get(code);
    if (!a) return { ok: false, reason: `no pairing code ${code}` };
    if (a.state !== 'open') return { ok: false, reason: `code ${code} was already ${a.state}`, approval: a };
    if (a.expires_at <= now) return { ok: false, reason: `code ${code} expired`, approval: a };
    this.decideStmt.run({ code, state: approve ? 'approved' : 'rejected', actor, now });
    const { platform } = parseJid(a.chat_jid);
    const id = a.sender.slice(platform.length + 1);
    const who = { group: a.group_folder, id, platform, now };
    let messages: number;
    if (approve) {
      this.memberStmt.run(a.member_folder, literalGlob(a.sender), `approved with code ${code} by ${actor}`);
      messages = this.releaseStmt.run(who).changes;
    } else {
      messages = this.denyStmt.run({ ...who, error: `rejected by ${actor}` }).changes;
    }
    insertOutbound(this.db, {
      chat_jid: a.chat_jid,
      kind: 'gateway',
      content: approve
        ? `You were approved for ${a.group_folder}: your messages go to the agent now.`
        : `Your request to join ${a.group_folder} was declined.`,
    });
    return { ok: true, approval: { ...this.get(code)! }, messages };
  }
}

/**
 * Puts a chat's `limited` rows back into the pipeline past their limits (an operator's release): they become
 * held with no hold left, so the gateway releases them on its next tick, oldest first. Returns how many.
 */
export function releaseLimited(db: Db, chatJid: string, now: number): number {
  return db
    .prepare(
      `UPDATE messages SET state = 'held', held_at = @now, max_hold_ms = 0, error = NULL, ${RELEASED_WAIT}
       WHERE state = 'limited' AND chat_jid = @chat`,
    )
    .run({ now, chat: chatJid }).changes;
}

/**
 * Whether gated waits for a decision in a chat: a pending tool approval asked there, or an open pairing code
 * issued there (the GitHub channel then reads `/approve CODE` comments without a mention of the bot).
 */
export function chatAwaitsDecision(db: Db): (chatJid: string) => boolean {
  const stmt = db
    .prepare(
      `SELECT EXISTS (SELECT 1 FROM tool_approvals WHERE chat_jid = @chat AND state = 'pending')
           OR EXISTS (SELECT 1 FROM approvals WHERE chat_jid = @chat AND state = 'open' AND expires_at > @now)`,
    )
    .pluck();
  return (chatJid) => stmt.get({ chat: chatJid, now: Date.now() }) === 1;
}
