import { groupDirOf } from '../core/group-dir.js';
import { isValidFolder, type SessionKey } from '../core/types.js';
import { networkOf } from '../store/groups.js';
import type { GroupRow } from '../store/queue.js';
import type { AgentSetup } from './agent-setup.js';
import { parseMountList } from './runtime/mounts.js';
import type { RunSpec } from './runtime/types.js';

/**
 * What the runtime gets to start one run: the group's folder, its container settings (the group's own
 * image before its agent profile's), and from the run's setup the configuration folders to mount read-only
 * and the profile's command. Throws for an invalid folder or a malformed mounts or network column.
 */
export function runSpecOf(
  groupsDir: string,
  key: SessionKey,
  runId: number,
  g: GroupRow | undefined,
  setup: AgentSetup | undefined,
): RunSpec {
  if (!isValidFolder(key.group)) throw new Error(`'${key.group}' is not a valid group folder`);
  return {
    runId,
    group: key.group,
    topic: key.topic,
    groupDir: groupDirOf(groupsDir, key.group),
    image: g?.image ?? setup?.image ?? null,
    network: networkOf(g?.network, key.group),
    mounts: parseMountList(g?.mounts),
    ...(setup ? { config: setup.mounts, command: setup.command } : {}),
  };
}
