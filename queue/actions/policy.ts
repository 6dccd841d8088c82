import { platformRow } from '../../core/platforms.js';
import { folderChain, inTree, isValidFolder, parseJid } from '../../core/types.js';
import { tryCompileGlob, type RouteTable } from '../../router/index.js';
import type { ActionStore, GroupTree } from '../../store/actions.js';
import { ACTION_TYPES, type ActionType } from './parse.js';

/**
 * Who may act where (docs/PROTOCOL.md). Pure decisions over a snapshot of the registered groups, the
 * routing table and a group's settings; nothing here writes.
 */

/** Splits a settings list written by an operator: space- or comma-separated words. */
export function words(text: string | null | undefined): string[] {
  return (text ?? '').split(/[\s,]+/).filter(Boolean);
}

/**
 * Resolves a delegation target like an `@name` prefix (a child of `from` first, then an absolute folder)
 * and requires it strictly below `from`. Returns the folder or the reason it is refused.
 */
export function delegationTarget(
  name: string,
  from: string,
  groups: Pick<GroupTree, 'has'>,
): string | { refused: string } {
  const child = `${from}/${name}`;
  if (isValidFolder(child) && groups.has(child)) return child;
  if (isValidFolder(name) && groups.has(name)) {
    return name !== from && inTree(name, from)
      ? name
      : { refused: `group '${name}' is not below '${from}': delegate only goes down (escalate goes up)` };
  }
  return { refused: `no group '${name}' below '${from}'` };
}

/** The nearest registered group above `from`, or undefined. */
export function parentOf(from: string, groups: Pick<GroupTree, 'has'>): string | undefined {
  return folderChain(from)
    .slice(1)
    .find((up) => groups.has(up));
}

/**
 * The action types a group may use: those its `actions` setting lists (all when unset), less the ones it
 * has no use for: `delegate` without a registered group below it, `escalate` without one above it.
 */
export function capabilitiesOf(
  group: string,
  setting: string | null | undefined,
  groups: GroupTree,
): ActionType[] {
  const listed = setting === null || setting === undefined ? null : new Set(words(setting));
  return ACTION_TYPES.filter((t) => {
    if (listed && !listed.has(t)) return false;
    if (t === 'delegate') return groups.hasBelow(group);
    if (t === 'escalate') return parentOf(group, groups) !== undefined;
    return true;
  });
}

/** What deciding whether a group may send to a chat needs. */
export interface SendScope {
  group: string;
  /** The chat the run answers. */
  runChat: string;
  routes: RouteTable;
  store: Pick<ActionStore, 'stickyGroup'>;
  /** registered_groups.send_allow of the group. */
  sendAllow: string | null;
}

/**
 * Whether the group may send to `chat`: the chat its run answers; a chat whose messages (verb `message`,
 * some sender) reach the group or one below it, through its `web:`/`local:` folder, its sticky group or the
 * routes; or a chat its `send_allow` globs name. Returns null when allowed, else the reason.
 */
export function sendRefusal(chat: string, s: SendScope): string | null {
  if (chat === s.runChat) return null;
  const { platform, room } = parseJid(chat);
  if (platformRow(platform)?.folderRooms && inTree(room, s.group)) return null;
  const sticky = s.store.stickyGroup(chat);
  if (sticky !== null && inTree(sticky, s.group)) return null;
  const reach = s.routes.targetsForAnySender({ platform, room, chat_jid: chat, verb: 'message' });
  if (reach.some((t) => t.kind === 'folder' && inTree(t.folder, s.group))) return null;
  for (const glob of words(s.sendAllow)) {
    const test = tryCompileGlob(glob);
    if (typeof test === 'function' && test(chat)) return null;
  }
  return `chat '${chat}' does not reach '${s.group}' (add it to registered_groups.send_allow to allow it)`;
}
