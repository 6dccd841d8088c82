import type { Message } from '../core/types.js';
import { principalId, principalOf } from '../store/access.js';
import { withActor } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { normalizeToolCode, toolApprovalsOf } from '../store/tool-approvals.js';
import type { AccessGate } from './access.js';

/**
 * `/approve CODE` and `/reject CODE [note]` for tool approvals (docs/APPROVALS.md), beside pairing codes:
 * a 5-character code is a tool approval's, an 8-character one a pairing code's. Typed or pressed (a
 * `button` row, docs/CHANNELS.md "Buttons"), the decision is checked here, in one place: admins always
 * may, then the group's owners, and its members too when the rule said `approvers: members`.
 */

/** Who may decide a tool approval of `folder` with these approvers; undefined: this sender may. */
export function toolRefusal(
  access: AccessGate,
  msg: Pick<Message, 'chat_jid' | 'sender'>,
  folder: string,
  approvers: string,
): string | undefined {
  const role = access.source.role(folder, principalOf(msg));
  if (role === 'owner') return undefined;
  if (role === 'member' && approvers === 'members') return undefined;
  return approvers === 'members'
    ? `only members and owners of ${folder} may decide this`
    : `only owners of ${folder} may decide this`;
}

/**
 * Decides the tool approval a typed code names; the answer to the chat, or undefined when the code is not
 * a tool approval's that this sender may decide (then it may be a pairing code). Runs inside the batch
 * transaction.
 */
export function decideToolFromChat(
  db: Db,
  access: AccessGate,
  msg: Message,
  args: readonly string[],
  approve: boolean,
  now: number,
): string | undefined {
  const code = args[0] === undefined ? undefined : normalizeToolCode(args[0]);
  if (code === undefined) return undefined;
  const store = toolApprovalsOf(db);
  const row = store.byCode(code);
  if (!row) return undefined;
  // Someone who may not decide learns nothing of the code, not even that it exists (decideCode answers).
  if (toolRefusal(access, msg, row.group_folder, row.approvers)) return undefined;
  if (row.state === 'cancelled')
    return `${code} is no longer asked: cancelled, ${row.note ?? 'its turn ended'}`;
  if (row.state !== 'pending') return `${code} was already decided (${row.state})`;
  const who = principalId(principalOf(msg));
  const note = approve ? null : args.slice(1).join(' ').trim().slice(0, 2000) || null;
  const done = withActor(db, `chat:${who}`, () => store.decide(code, approve, who, note, now));
  if (!done) return `${code} was already decided`;
  return `${approve ? 'approved' : 'rejected'} ${row.tool} (${code})`;
}

/**
 * `/approve CODE` and `/reject CODE [note]` from a chat, tool approvals and pairing codes alike: the answer to
 * the chat. A code the sender may not decide gets the same answer as one that does not exist, and counts as
 * a guess (code-guesses.ts); a sender out of guesses is told until when. Runs inside the batch transaction.
 */
export function decideCode(
  db: Db,
  access: AccessGate,
  msg: Message,
  args: readonly string[],
  approve: boolean,
  now: number,
  group?: string,
): string {
  const verb = approve ? 'approve' : 'reject';
  const typed = args[0];
  if (typed === undefined) return `usage: /${verb} CODE`;
  const who = principalId(principalOf(msg));
  const out = access.guesses.refusal(who, now);
  if (out !== undefined) return out;
  const answer =
    decideToolFromChat(db, access, msg, args, approve, now) ??
    access.decideFromChat(msg, typed, approve, now);
  if (answer !== undefined) return answer;
  access.guesses.miss(who, now);
  return `you may not ${verb} ${typed.slice(0, 16).toUpperCase()}: no such code is open to you${becomeOwner(access, msg, who, group)}`;
}

/**
 * How a sender who is not an owner of the chat's group becomes one, said after a refused code (the same
 * words whether the code exists or not, so they tell nothing of it): the operator's command with the
 * sender's own id, which a newcomer could not otherwise know (docs/APPROVALS.md, "Try it").
 */
function becomeOwner(access: AccessGate, msg: Message, who: string, group: string | undefined): string {
  if (group === undefined || access.source.role(group, principalOf(msg)) === 'owner') return '';
  return ` (owners of ${group} decide its questions; you are ${who}: the operator makes you one with 'gated access add ${group} ${who} --role owner')`;
}
