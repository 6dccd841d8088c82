import { GROUP_SCOPE, type Fact, type RecallScope } from '../../store/memory.js';
import type { HistoryScope } from '../../store/history-index.js';

/**
 * Whose memory a turn may write and read (docs/MEMORY.md). Pure decisions over the senders of the turn: a
 * fact a stranger's turn produced is that stranger's alone; a turn reads the group's facts and its own
 * senders' facts; it searches the group's history as far as its every sender may see it.
 */

/** A sender of a turn as memory sees it. */
export interface TurnSender {
  /** `platform:id`, the scope of that sender's own facts. */
  sender: string;
  /** The role the agent was told (`owner`, `member`, `guest`, `system`). */
  role: string;
  /** The sender may reach the group (an open group, or a role in it): it may read the group's history. */
  reaches: boolean;
}

/** The distinct people of a turn (a task's row is gated's own, `system`, and no person). */
function people(senders: readonly TurnSender[]): TurnSender[] {
  const seen = new Map<string, TurnSender>();
  for (const s of senders) if (s.role !== 'system' && !seen.has(s.sender)) seen.set(s.sender, s);
  return [...seen.values()];
}

/**
 * The scope a `remember` of this turn gets, or the reason it is refused: a stranger's turn (any `guest`
 * among its senders) is scoped to that stranger, whatever the agent asked; `sender` needs one person.
 */
export function rememberScope(
  asked: 'group' | 'sender' | undefined,
  senders: readonly TurnSender[],
): string | { refused: string } {
  const who = people(senders);
  const guests = who.filter((s) => s.role === 'guest');
  if (guests.length > 1)
    return { refused: 'a turn of several strangers cannot be remembered: each fact is one stranger’s' };
  if (guests.length === 1) return guests[0]!.sender;
  if (asked !== 'sender') return GROUP_SCOPE;
  if (who.length !== 1) return { refused: 'scope "sender" needs a turn of exactly one sender' };
  return who[0]!.sender;
}

/**
 * Why the agent may not forget `fact` in this turn, or null when it may: a fact of its group, the group's
 * only in a turn without strangers, a sender's only in a turn of that sender.
 */
export function forgetRefusal(
  fact: Fact | undefined,
  group: string,
  senders: readonly TurnSender[],
): string | null {
  if (fact === undefined || fact.group_folder !== group) return `no fact with that id in '${group}'`;
  const who = people(senders);
  if (fact.scope === GROUP_SCOPE) {
    return who.some((s) => s.role === 'guest') ? 'a stranger’s turn cannot forget the group’s facts' : null;
  }
  return who.some((s) => s.sender === fact.scope) ? null : 'that fact is another sender’s';
}

/** What a turn's recall reads: the group's facts and its senders' own. */
export function recallScope(group: string, senders: readonly TurnSender[]): RecallScope {
  return { group, senders: people(senders).map((s) => s.sender) };
}

/**
 * What a turn's history search may see: every served row when each of its senders may reach the group,
 * else only the rows of the one who may not (its own words and the answers to them; of two, nothing).
 */
export function historyScope(group: string, senders: readonly TurnSender[]): HistoryScope {
  const outside = people(senders).filter((s) => !s.reaches);
  if (outside.length === 0) return { group, only: null };
  // Each one's rows are hidden from the other: two such senders together may see nothing.
  return { group, only: outside.length === 1 ? [outside[0]!.sender] : [] };
}
