import { chmodSync, realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { UsageError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';

/**
 * Who a process-runtime agent runs as (docs/SECURITY.md, "Runtimes"). A gated run as root never gives an
 * agent its own privileges: the agent runs under an unprivileged uid of its own (GATED_PROCESS_USER,
 * default DEFAULT_AGENT_USER), with no capability at all (none effective, inheritable or in its bounding
 * set) and no way to gain one (no_new_privs: a setuid program does not raise it). Such an agent cannot
 * unmount its PID namespace's /proc to see the machine's, cannot read a root process's environment
 * (/proc/<pid>/environ needs the same uid or CAP_SYS_PTRACE), and reads only what its uid may: gated's
 * database and `.env` are made owner-only at start (gated/data-modes.ts).
 */

/** uid:gid of a process-runtime agent under a root gated. */
export interface AgentUser {
  uid: number;
  gid: number;
}

/**
 * The default: a uid no account of a usual system has. An operator who wants a named account makes one
 * (`useradd --system --no-create-home gated-agent`) and sets GATED_PROCESS_USER to its uid:gid.
 */
export const DEFAULT_AGENT_USER: AgentUser = { uid: 65533, gid: 65533 };

/**
 * The agent user for the setting `value` (GATED_PROCESS_USER: `uid:gid`, or `root` to keep agents as root,
 * which gives them gated's privileges) when gated runs as `ownUid`. null: the agent runs as gated's own
 * user (gated is not root, or the operator chose `root`). Throws a UsageError for a malformed value, or a
 * value other than gated's own user when gated is not root (only root can start a process as another).
 */
export function agentUserOf(value: string | undefined, ownUid: number | undefined): AgentUser | null {
  if (value === 'root') return null;
  const user = value === undefined ? null : parseUser(value);
  if (ownUid !== 0) {
    if (user !== null && user.uid !== ownUid)
      throw new UsageError(
        `GATED_PROCESS_USER=${value}: only a gated run as root can start agents as another user`,
      );
    return null;
  }
  if (user?.uid === 0) return null;
  return user ?? DEFAULT_AGENT_USER;
}

function parseUser(value: string): AgentUser {
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(value.trim());
  const uid = Number(m?.[1]);
  const gid = Number(m?.[2]);
  if (!m || uid > 0xfffffffe || gid > 0xfffffffe)
    throw new UsageError(`GATED_PROCESS_USER must be uid:gid (such as 65533:65533) or root, got '${value}'`);
  return { uid, gid };
}

/**
 * The command prefix that starts a program as `user`, after the PID namespace is made (which needs root):
 * util-linux's setpriv, which sets the uid and gid, clears the supplementary groups, empties every
 * capability set and sets no_new_privs before it execs the program.
 */
export function dropPrefix(user: AgentUser): string[] {
  return [
    'setpriv',
    `--reuid=${user.uid}`,
    `--regid=${user.gid}`,
    '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    '--no-new-privs',
    '--',
  ];
}

/** True when `user` may search (x) the directory whose stat is `st`. */
function searchable(st: { uid: number; gid: number; mode: number }, user: AgentUser): boolean {
  if (st.uid === user.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === user.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/**
 * Makes every folder from `/` down to `dir` (the groups folder, the agent's program: the operator's paths,
 * never a group's folder, which changes owner instead) searchable by `user`: the x bit for others, never
 * the r bit, so names stay unlisted. The agent then reaches its group's folder and its program by their
 * paths, as a container reaches /workspace. A folder made private (a temporary folder of mode 0700, a home
 * of 0750) gets the one bit and a warning that names it; a searchable one costs a stat.
 */
export function openPathFor(dir: string, user: AgentUser, log: Logger | undefined): void {
  const chain: string[] = [];
  for (let d = realpathSync(dir); ; d = dirname(d)) {
    chain.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of chain) {
    const st = statSync(d);
    if (!st.isDirectory() || searchable(st, user)) continue;
    chmodSync(d, (st.mode & 0o7777) | 0o001);
    log?.warn(
      { dir: d, mode: (st.mode & 0o777).toString(8) },
      'made searchable (o+x) for the process runtime agent user',
    );
  }
}
