import { platformRow } from '../../core/platforms.js';
import { parseJid, routeFields, type Message } from '../../core/types.js';
import {
  DEFAULT_IMPULSE,
  type ImpulseConfig,
  type Resolution,
  type RouteTable,
  type Target,
} from '../../router/index.js';
import type { Passage, LayerEnv } from './types.js';

/** Where layer 4 sends a message. */
export interface RoutingDecision {
  target: Target | undefined;
  routeId: number | undefined;
  impulse: ImpulseConfig;
}

/** The folder a `web:<folder>` or `local:<folder>` chat belongs to (its platform's `folderRooms`), if it is one. */
export function directFolder(msg: Pick<Message, 'chat_jid'>): string | undefined {
  const { platform, room } = parseJid(msg.chat_jid);
  return platformRow(platform)?.folderRooms ? room : undefined;
}

/**
 * Layer 4. A group chosen by an earlier layer (sticky or prefix) wins; `web:` and `local:` chats go straight
 * to their folder; everything else walks the routes table in (seq, id) order, first match wins. The impulse
 * configuration is the matching route's, or the defaults when no route decided.
 */
export function routeLayer(passage: Passage, env: LayerEnv): RoutingDecision {
  const hit = routeOf(passage, env.catalog.table);
  const impulse = hit?.route.impulse ?? DEFAULT_IMPULSE;
  const chosen = passage.group ?? directFolder(passage.msg);
  if (chosen) return { target: { kind: 'folder', folder: chosen }, routeId: undefined, impulse };
  return { target: hit?.target, routeId: hit?.route.row.id, impulse };
}

/** The first matching route of a message, resolved once and kept on the passage for every later layer. */
export function routeOf(passage: Passage, table: RouteTable): Resolution | null {
  if (passage.resolution === undefined) passage.resolution = table.resolve(routeFields(passage.msg));
  return passage.resolution;
}

/**
 * The group a chat belongs to when no layer chose one: its own folder (web/local) or its route's folder.
 * Earlier layers (sticky, commands, prefix) ask it to resolve `@name` relative to the chat's group.
 */
export function chatGroupOf(passage: Passage, table: RouteTable): string | undefined {
  const direct = directFolder(passage.msg);
  if (direct) return direct;
  const hit = routeOf(passage, table);
  return hit?.target.kind === 'folder' ? hit.target.folder : undefined;
}
