import { isoNow } from '../core/types.js';
import type { Db } from './db.js';

/**
 * The rows behind agents' actions (docs/PROTOCOL.md): the `actions` log, `delegations`, and the inbound rows
 * gated places straight into a session for a delegation and for its answers. Statements are prepared once
 * per connection; every function runs inside the caller's transaction (the block's), so an action, its
 * effect and the block's reply commit together.
 */

/** Chats of delegations are `delegation:<id>`: no platform owns them, answers go back to the delegator. */
export const DELEGATION_PLATFORM = 'delegation';

/** An action as logged. */
export interface ActionLogRow {
  run_id: number | null;
  group: string;
  topic: string;
  chat_jid: string | null;
  type: string;
  payload: string;
  status: 'applied' | 'refused';
  reason: string | null;
}

/** One row of `delegations`. */
export interface DelegationRow {
  id: number;
  action_id: number;
  kind: 'delegate' | 'escalate';
  from_group: string;
  from_topic: string;
  from_chat: string;
  from_thread: string;
  to_group: string;
  depth: number;
  message_id: number | null;
  answers: number;
  /** The message whose turn started the chain (null only for delegations older than chains). */
  origin: number | null;
}

/** Where a row stands in a delegation chain: the delegation it belongs to, and whether it is an answer. */
export interface ChainRow {
  delegation: DelegationRow;
  answer: boolean;
}

/** What a group's row says about its actions. */
export interface GroupActionSettings {
  send_allow: string | null;
  actions: string | null;
}

function prepare(db: Db) {
  return {
    log: db.prepare(
      `INSERT INTO actions (run_id, group_folder, topic, chat_jid, type, payload, status, reason, created_at)
       VALUES (@run_id, @group, @topic, @chat_jid, @type, @payload, @status, @reason, @at)`,
    ),
    linkMessage: db.prepare('UPDATE actions SET message_id = ? WHERE id = ?'),
    linkTask: db.prepare('UPDATE actions SET task_id = ? WHERE id = ?'),
    delegation: db.prepare(
      `INSERT INTO delegations (action_id, kind, from_group, from_topic, from_chat, from_thread, to_group, depth,
                                origin, created_at)
       VALUES (@action_id, @kind, @from_group, @from_topic, @from_chat, @from_thread, @to_group, @depth,
               @origin, @at)`,
    ),
    chainRow: db.prepare(
      'INSERT INTO delegation_rows (message_id, delegation_id, origin, answer) VALUES (?, ?, ?, ?)',
    ),
    rowOf: db.prepare('SELECT delegation_id, answer FROM delegation_rows WHERE message_id = ?'),
    hops: db.prepare('SELECT count(*) FROM delegation_rows WHERE origin = ?').pluck(),
    linkDelegation: db.prepare('UPDATE delegations SET message_id = ? WHERE id = ?'),
    getDelegation: db.prepare('SELECT * FROM delegations WHERE id = ?'),
    countAnswer: db.prepare('UPDATE delegations SET answers = answers + 1 WHERE id = ?'),
    // Placed straight into a session: state 'ready', so the poll loop and the layers never see it; or
    // 'limited' (an answer past a bound), kept for an operator's release (`gated access release`).
    placed: db.prepare(
      `INSERT INTO messages (chat_jid, sender, sender_name, content, verb, topic, timestamp, state, group_folder,
                             session_topic, target, weight, ready_at, error)
       VALUES (@chat, @sender, @sender_name, @content, @verb, @topic, @at, @state, @group, @session_topic,
               @target, 0, @now, @error)`,
    ),
    settings: db.prepare('SELECT send_allow, actions FROM registered_groups WHERE folder = ?'),
    allActions: db.prepare('SELECT folder, actions FROM registered_groups'),
    isGroup: db.prepare('SELECT 1 FROM registered_groups WHERE folder = ?').pluck(),
    // The folders strictly below `a/b` are those after 'a/b/' and before 'a/b0' ('0' follows '/'):
    // one seek in the primary key's index, whatever the number of groups.
    anyBelow: db.prepare('SELECT 1 FROM registered_groups WHERE folder > ? AND folder < ? LIMIT 1').pluck(),
    sticky: db.prepare('SELECT sticky_group FROM chat_state WHERE chat_jid = ?').pluck(),
    note: db.prepare(
      'INSERT INTO system_messages (group_folder, topic, content, created_at) VALUES (?, ?, ?, ?)',
    ),
  };
}

type Statements = ReturnType<typeof prepare>;
const cache = new WeakMap<Db, Statements>();

/** Which group folders are registered, asked one folder at a time. */
export interface GroupTree {
  /** `folder` is a registered group. */
  has(folder: string): boolean;
  /** A registered group lies strictly below `folder`. */
  hasBelow(folder: string): boolean;
}

/** The actions statements on one connection. */
export class ActionStore {
  private readonly s: Statements;

  constructor(db: Db) {
    let s = cache.get(db);
    if (!s) cache.set(db, (s = prepare(db)));
    this.s = s;
  }

  /** Logs an action (before its effect). Returns its id. */
  log(row: ActionLogRow, now: number): number {
    return Number(this.s.log.run({ ...row, at: isoNow(now) }).lastInsertRowid);
  }

  /** Records the row an applied action made. */
  linkMessage(actionId: number, messageId: number): void {
    this.s.linkMessage.run(messageId, actionId);
  }

  /** Records the task a `schedule` action made. */
  linkTask(actionId: number, taskId: number): void {
    this.s.linkTask.run(taskId, actionId);
  }

  /**
   * The registered groups as a tree answered by indexed lookups, read when asked (an operator's sqlite3
   * edit counts at once; nothing is cached to go stale).
   */
  tree(): GroupTree {
    return this.treeOnce;
  }

  private readonly treeOnce: GroupTree = {
    has: (folder) => this.s.isGroup.get(folder) !== undefined,
    hasBelow: (folder) => this.s.anyBelow.get(`${folder}/`, `${folder}0`) !== undefined,
  };

  /** Every registered group's `actions` setting (queue/actions/capabilities.ts). */
  allActions(): Array<{ folder: string; actions: string | null }> {
    return this.s.allActions.all() as Array<{ folder: string; actions: string | null }>;
  }

  /** A group's action settings, or undefined when it is not registered. */
  settings(folder: string): GroupActionSettings | undefined {
    return this.s.settings.get(folder) as GroupActionSettings | undefined;
  }

  /** The chat's sticky group, if any. */
  stickyGroup(chatJid: string): string | null {
    return (this.s.sticky.get(chatJid) as string | null | undefined) ?? null;
  }

  /** A delegation by id. */
  delegation(id: number): DelegationRow | undefined {
    return this.s.getDelegation.get(id) as DelegationRow | undefined;
  }

  /** The chain an inbound row gated placed belongs to, or undefined for any other row. */
  chainRow(messageId: number): ChainRow | undefined {
    const r = this.s.rowOf.get(messageId) as { delegation_id: number; answer: number } | undefined;
    const delegation = r && this.delegation(r.delegation_id);
    return delegation && { delegation, answer: r.answer === 1 };
  }

  /** The hops a chain has made so far: the rows placed for it (delegations and answers). */
  hops(origin: number): number {
    return this.s.hops.get(origin) as number;
  }

  /**
   * Hands work to another group: the delegations row, then the inbound row for `to_group` in the chat
   * `delegation:<id>` (verb `delegate` or `escalate`, sender `group:<from>`). Returns both ids.
   */
  delegate(
    d: Omit<DelegationRow, 'id' | 'message_id' | 'answers' | 'origin'> & { origin: number },
    text: string,
    now: number,
  ): { delegation: number; message: number } {
    const at = isoNow(now);
    const delegation = Number(this.s.delegation.run({ ...d, at }).lastInsertRowid);
    const message = Number(
      this.s.placed.run({
        chat: `${DELEGATION_PLATFORM}:${delegation}`,
        sender: `group:${d.from_group}`,
        sender_name: d.from_group,
        content: text,
        verb: d.kind,
        topic: '',
        at,
        state: 'ready',
        error: null,
        group: d.to_group,
        session_topic: '',
        target: d.to_group,
        now,
      }).lastInsertRowid,
    );
    this.s.linkDelegation.run(message, delegation);
    this.s.chainRow.run(message, delegation, d.origin, 0);
    return { delegation, message };
  }

  /**
   * One answer of a delegated run goes back to the delegating session: an inbound row with verb
   * `delegation` in its chat, group and topic, ready for a follow-up or a new run, or `limited` with the
   * reason when `withheld` names one (a bound of the chain or of the session's group was reached).
   */
  returnAnswer(
    d: DelegationRow,
    fromGroup: string,
    text: string,
    now: number,
    withheld: string | null,
  ): number {
    this.s.countAnswer.run(d.id);
    const id = Number(
      this.s.placed.run({
        chat: d.from_chat,
        sender: `group:${fromGroup}`,
        sender_name: fromGroup,
        content: text,
        verb: 'delegation',
        topic: d.from_thread,
        at: isoNow(now),
        state: withheld === null ? 'ready' : 'limited',
        error: withheld,
        group: d.from_group,
        session_topic: d.from_topic,
        target: d.from_group,
        now,
      }).lastInsertRowid,
    );
    this.s.chainRow.run(id, d.id, d.origin ?? d.message_id ?? 0, 1);
    return id;
  }

  /** A note for the session's next line (system_messages). */
  note(group: string, topic: string, content: string, now: number): void {
    this.s.note.run(group, topic, content, isoNow(now));
  }
}

/** The delegation id of a `delegation:<id>` chat, or null for any other chat. */
export function delegationOf(chatJid: string): number | null {
  const m = /^delegation:(\d+)$/.exec(chatJid);
  return m ? Number(m[1]) : null;
}
