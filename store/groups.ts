import type { Logger } from '../core/log.js';
import { checkGroupDirSync, groupDirOf } from '../core/group-dir.js';
import { UsageError } from '../core/errors.js';
import { clipText } from '../core/text.js';
import { folderError, threadModeOf, type BusyMode, type ThreadMode } from '../core/types.js';
import { autonomyOf, DEFAULT_AUTONOMY, type Autonomy } from '../router/autonomy.js';
import type { Db } from './db.js';

/** A registered agent workspace. */
export interface Group {
  folder: string;
  name: string | null;
  image: string | null;
  /** The docker network its containers join (NULL: none). */
  network: string | null;
  mounts: string | null;
  /** The preset for tool calls no rule decides (docs/APPROVALS.md); a raw edit may hold anything. */
  autonomy: unknown;
  added_at: string;
}

/** Every registered group by folder. */
export function listGroups(db: Db): Group[] {
  return db.prepare('SELECT * FROM registered_groups ORDER BY folder').all() as Group[];
}

/** One group, or undefined. */
export function getGroup(db: Db, folder: string): Group | undefined {
  return db.prepare('SELECT * FROM registered_groups WHERE folder = ?').get(folder) as Group | undefined;
}

/**
 * Registers a group and creates its folder under `groupsDir` (`pub/c` at `<groupsDir>/pub+c`, core/group-dir.ts). Refuses a malformed folder name (UsageError)
 * before anything touches the disk; adding an existing group updates its name.
 */
export function addGroup(db: Db, groupsDir: string, folder: string, name?: string): void {
  const bad = folderError(folder);
  if (bad !== null) throw new UsageError(`bad group folder '${clipText(folder, 40)}': ${bad}`);
  checkGroupDirSync(groupDirOf(groupsDir, folder));
  db.prepare(
    `INSERT INTO registered_groups (folder, name) VALUES (?, ?)
     ON CONFLICT (folder) DO UPDATE SET name = coalesce(excluded.name, name)`,
  ).run(folder, name ?? null);
}

/**
 * Sets what a platform thread is to the group (registered_groups.threads: `topics` or `replies`, docs/CHANNELS.md). False when the group is not registered.
 */
export function setThreadMode(db: Db, folder: string, mode: ThreadMode): boolean {
  return (
    db.prepare('UPDATE registered_groups SET threads = ? WHERE folder = ?').run(mode, folder).changes > 0
  );
}

/**
 * Sets what a new message does while the group's agent works on a turn (registered_groups.busy,
 * docs/PROTOCOL.md "Steering"). False when the group is not registered.
 */
export function setBusyMode(db: Db, folder: string, mode: BusyMode): boolean {
  return db.prepare('UPDATE registered_groups SET busy = ? WHERE folder = ?').run(mode, folder).changes > 0;
}

/** Reads a group's thread mode with one statement made once; an unknown group or value reads `topics`. */
export function threadModeReader(db: Db): (folder: string) => ThreadMode {
  const stmt = db.prepare('SELECT threads FROM registered_groups WHERE folder = ?').pluck();
  return (folder) => threadModeOf(stmt.get(folder));
}

/** Sets the group's autonomy (registered_groups.autonomy, docs/APPROVALS.md). False when the group is not registered. */
export function setAutonomy(db: Db, folder: string, level: Autonomy): boolean {
  return (
    db.prepare('UPDATE registered_groups SET autonomy = ? WHERE folder = ?').run(level, folder).changes > 0
  );
}

/**
 * Reads a group's autonomy with one statement made once: the stored level, or null when the value is not
 * a level (a raw edit; the broker treats it as `supervised`) or the group is not registered (undefined).
 */
export function autonomyReader(db: Db): (folder: string) => { level: Autonomy; stored: unknown } | undefined {
  const stmt = db.prepare('SELECT autonomy FROM registered_groups WHERE folder = ?').pluck();
  return (folder) => {
    const stored: unknown = stmt.get(folder);
    if (stored === undefined) return undefined;
    return { level: autonomyOf(stored) ?? DEFAULT_AUTONOMY, stored };
  };
}

/** A Docker network name; refuses `container:<id>` (another container's namespace) and anything odd. */
const NETWORK_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * The network a group's containers join, from registered_groups.network as stored: null for none (NULL,
 * '', `none`, and the old boolean's `0`), `bridge` for the old boolean's `1`, else the name itself. Throws
 * an Error naming the group for a value that is no network name.
 */
export function networkOf(value: unknown, folder: string): string | null {
  if (value === null || value === undefined || value === '' || value === 'none') return null;
  if (value === 0 || value === '0') return null;
  if (value === 1 || value === '1') return 'bridge';
  if (typeof value === 'string' && NETWORK_NAME.test(value)) return value;
  throw new Error(
    `group '${folder}': registered_groups.network ${JSON.stringify(value)} is not a docker network name`,
  );
}

/**
 * Sets the network a group's containers join (`none` or null: no network). Refuses a malformed name
 * (UsageError); false when the group is not registered.
 */
export function setNetwork(db: Db, folder: string, name: string | null): boolean {
  let network: string | null;
  try {
    network = networkOf(name, folder);
  } catch {
    throw new UsageError(
      `bad network name '${name}': a docker network such as 'bridge', 'host' or one made with 'docker network create' (letters, digits, '_', '.', '-'), or 'none'`,
    );
  }
  return (
    db.prepare('UPDATE registered_groups SET network = ? WHERE folder = ?').run(network, folder).changes > 0
  );
}

/** Unregisters a group (its files stay on disk). False when it was not registered. */
export function removeGroup(db: Db, folder: string): boolean {
  return db.prepare('DELETE FROM registered_groups WHERE folder = ?').run(folder).changes > 0;
}

/**
 * Reads a group's swarm placement (registered_groups.placement, JSON) with one statement made once. A
 * malformed value is logged to `log` and treated as no placement: the run still starts.
 */
export function placementReader(
  db: Db,
  log: Pick<Logger, 'warn'>,
): (
  group: string,
) => { constraints?: string[]; reserveMemoryBytes?: number; reserveCpus?: number } | undefined {
  const stmt = db.prepare('SELECT placement FROM registered_groups WHERE folder = ?').pluck();
  return (group) => {
    const text = stmt.get(group) as string | null | undefined;
    if (!text) return undefined;
    try {
      const v = JSON.parse(text) as Record<string, unknown>;
      const constraints = Array.isArray(v.constraints)
        ? v.constraints.filter((c) => typeof c === 'string')
        : [];
      const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : undefined);
      return { constraints, reserveMemoryBytes: num(v.reserveMemoryBytes), reserveCpus: num(v.reserveCpus) };
    } catch (err) {
      log.warn(
        { group, reason: (err as Error).message },
        'registered_groups.placement is not valid JSON; placing anywhere',
      );
      return undefined;
    }
  };
}
