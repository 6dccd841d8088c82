import { isValidFolder, TOPIC_RE } from '../../core/types.js';
import type { Catalog } from '../../store/routes.js';

/**
 * Resolves an `@name` the way the sticky and prefix layers do: a child of the chat's group first
 * (`@content` in a chat of `krons` → `krons/content`), then an absolute folder. Undefined when no
 * registered group has that name.
 */
export function resolveGroupName(
  name: string,
  chatGroup: string | undefined,
  catalog: Catalog,
): string | undefined {
  if (chatGroup) {
    const child = `${chatGroup}/${name}`;
    if (isValidFolder(child) && catalog.groups.has(child)) return child;
  }
  return isValidFolder(name) && catalog.groups.has(name) ? name : undefined;
}

/** True when `name` can be a topic (`#support` → `support`). */
export function isTopicName(name: string): boolean {
  return TOPIC_RE.test(name);
}
