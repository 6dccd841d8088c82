import type { SessionKey } from '../../core/types.js';
import type { ActionStore, GroupTree } from '../../store/actions.js';
import { capabilitiesOf } from './policy.js';

/**
 * The action types of every group's agents, from one read of registered_groups kept while router_state
 * 'access_version' stays as a run's batch read it. They come from that table alone (a group's `actions`, a
 * group above or below it), and every insert, update or delete of it bumps the version (schema.sql),
 * whichever connection made it, so an operator's edit counts from the next run on. A run start then reads
 * none of its three rows, the first run of a group too (a burst over 10,000 groups has one run of most).
 * Without a version (none was read) the rows are read as before.
 */
export function capabilitiesByVersion(
  store: Pick<ActionStore, 'allActions'>,
  live: (group: string) => string[],
): (key: SessionKey, accessVersion?: string | null) => string[] {
  let at: string | undefined;
  let actions = new Map<string, string | null>();
  let folders: string[] = [];
  const tree: GroupTree = {
    has: (folder) => actions.has(folder),
    // The first folder after `folder/` in the sorted list is below `folder` if any is.
    hasBelow: (folder) => {
      const from = `${folder}/`;
      let lo = 0;
      let hi = folders.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (folders[mid]! <= from) lo = mid + 1;
        else hi = mid;
      }
      return lo < folders.length && folders[lo]!.startsWith(from);
    },
  };
  const kept = new Map<string, string[]>();
  return (key, version) => {
    if (version === undefined || version === null) return live(key.group);
    if (version !== at) {
      const rows = store.allActions();
      actions = new Map(rows.map((r) => [r.folder, r.actions]));
      // Sorted here, by the same comparison the search makes (SQLite's order is by bytes).
      folders = rows.map((r) => r.folder).sort();
      kept.clear();
      at = version;
    }
    let caps = kept.get(key.group);
    if (caps === undefined) {
      caps = actions.has(key.group) ? capabilitiesOf(key.group, actions.get(key.group), tree) : [];
      kept.set(key.group, caps);
    }
    return caps;
  };
}
