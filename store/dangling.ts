import { parseTarget } from '../router/target.js';
import { BUILT_IN_AGENTS } from './agents.js';
import type { Db } from './db.js';

/**
 * Names that point nowhere: a route whose group or daemon is not registered, a group naming an agent that
 * is neither built in nor an agent_profiles row, a task or a limit of a group that does not exist. Each is
 * accepted by SQL, and each makes every message or run that follows it fail; `gated routes check` and
 * `gated doctor` list them, the CLI and the dashboard refuse or warn where they are written.
 */
export interface Dangling {
  /** The row that names it: `route 7`, `group ops`, `task 3`, `limits ops`. */
  where: string;
  /** What it names and why that is nowhere, one line. */
  reason: string;
  /** The command that mends it. */
  fix: string;
}

/** Why a route's target points nowhere, or undefined (also for targets invalid on their own: routes check says those). */
export function danglingTarget(db: Db, target: string): string | undefined {
  const t = parseTarget(target);
  if ('error' in t) return undefined;
  if (t.kind === 'folder' && !groupExists(db, t.folder)) {
    return `group '${t.folder}' is not registered: the messages it takes fail until 'gated groups add ${t.folder}'`;
  }
  if (t.kind === 'daemon' && !db.prepare('SELECT 1 FROM daemons WHERE name = ?').get(t.name)) {
    return `daemon '${t.name}' is not registered: the messages it takes fail`;
  }
  return undefined;
}

/** Why a group's agent name points nowhere, or undefined. `null` is the default agent. */
export function danglingAgent(db: Db, agent: string | null): string | undefined {
  if (agent === null || (BUILT_IN_AGENTS as readonly string[]).includes(agent)) return undefined;
  if (db.prepare('SELECT 1 FROM agent_profiles WHERE name = ?').get(agent)) return undefined;
  const profiles = db.prepare('SELECT name FROM agent_profiles ORDER BY name').pluck().all() as string[];
  const known = [...BUILT_IN_AGENTS, ...profiles].map((n) => `'${n}'`).join(', ');
  return `agent '${agent}' is neither built in nor an agent_profiles row (known: ${known}): every run fails`;
}

function groupExists(db: Db, folder: string): boolean {
  return db.prepare('SELECT 1 FROM registered_groups WHERE folder = ?').get(folder) !== undefined;
}

/** Every name in the database that points nowhere, routes first, then groups, tasks and limits. */
export function danglingNames(db: Db): Dangling[] {
  const found: Dangling[] = [];
  const routes = db.prepare('SELECT id, target FROM routes ORDER BY seq, id').all() as {
    id: number;
    target: string;
  }[];
  for (const r of routes) {
    const reason = danglingTarget(db, r.target);
    if (reason)
      found.push({
        where: `route ${r.id}`,
        reason,
        fix: `gated groups add FOLDER, or gated routes rm ${r.id}`,
      });
  }
  const groups = db.prepare('SELECT folder, agent FROM registered_groups ORDER BY folder').all() as {
    folder: string;
    agent: string | null;
  }[];
  for (const g of groups) {
    const reason = danglingAgent(db, g.agent);
    if (reason) {
      found.push({
        where: `group ${g.folder}`,
        reason,
        fix: `gated groups agent ${g.folder} default (or add the profile)`,
      });
    }
  }
  const orphans = db
    .prepare(
      `SELECT 'task ' || id AS "where", group_folder AS folder FROM tasks
        WHERE status != 'done' AND group_folder NOT IN (SELECT folder FROM registered_groups)
       UNION ALL
       SELECT 'limits ' || group_folder, group_folder FROM limits
        WHERE group_folder NOT IN (SELECT folder FROM registered_groups)`,
    )
    .all() as { where: string; folder: string }[];
  for (const o of orphans) {
    found.push({
      where: o.where,
      reason: `group '${o.folder}' is not registered`,
      fix: `gated groups add ${o.folder}, or delete the row`,
    });
  }
  return found;
}
