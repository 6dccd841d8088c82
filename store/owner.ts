import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { UsageError } from '../core/errors.js';
import type { Db } from './db.js';
import { writeEvery } from './group-commit.js';
import { getState, setState, stateOf } from './state.js';

/** Who runs the gateway on a database: one `gated run` at a time may own it. */
export interface Owner {
  /** Random per process start: two gateways in one process are two owners too. */
  token: string;
  pid: number;
  host: string;
  started: string;
  heartbeat: number;
  /** When the kernel started the process (/proc/<pid>/stat, clock ticks after boot); absent without /proc. */
  since?: string;
}

const KEY = 'owner';
/** A heartbeat older than this means the owner is gone (crashed or killed). */
export const OWNER_STALE_MS = 15_000;

/** The start time of process `pid` as /proc tells it, or undefined (no such process, no /proc). */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses); starttime is field 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function alive(pid: number, since: string | undefined): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // The pid may belong to another process by now: pids wrap (32768 of them by default) and agents use many.
  // A process started at another time is not the owner.
  const now = since === undefined ? undefined : processStart(pid);
  return now === undefined || now === since;
}

/** The live owner of the database, if any (a stale heartbeat does not count). */
export function liveOwner(db: Db, now = Date.now()): Owner | undefined {
  const raw = getState(db, KEY);
  if (!raw) return undefined;
  try {
    const o = JSON.parse(raw) as Owner;
    if (now - o.heartbeat >= OWNER_STALE_MS) return undefined;
    // A gated killed with -9 leaves a fresh heartbeat; on this host its pid (and the process's start
    // time, in case the pid was given to another process since) tells the truth at once.
    if (o.host === hostname() && !alive(o.pid, o.since)) return undefined;
    return o;
  } catch {
    return undefined;
  }
}

/**
 * Claims the database for this process, refusing when another gated owns it: two gateways would each
 * dispatch the same sessions. Keeps a heartbeat while running; `release()` gives it up.
 */
export function claimOwner(db: Db): { release(): void } {
  const me: Owner = {
    token: randomUUID(),
    pid: process.pid,
    host: hostname(),
    started: new Date().toISOString(),
    heartbeat: Date.now(),
    ...(processStart(process.pid) !== undefined ? { since: processStart(process.pid)! } : {}),
  };
  db.transaction(() => {
    const other = liveOwner(db);
    if (other) {
      throw new UsageError(
        `another gated (pid ${other.pid} on ${other.host}) runs on this database; stop it first, or use 'gated chat' to talk through it`,
      );
    }
    setState(db, KEY, JSON.stringify(me));
  }).immediate();
  // A beat waits for another process's write lock off the event loop (an operator's open transaction
  // must not stop gated); a failed beat is skipped, the next one catches up.
  const timer = writeEvery(
    db,
    OWNER_STALE_MS / 3,
    () => {
      me.heartbeat = Date.now();
      setState(db, KEY, JSON.stringify(me));
    },
    () => undefined,
  );
  return {
    release() {
      clearInterval(timer);
      try {
        const cur = getState(db, KEY);
        if (cur && (JSON.parse(cur) as Owner).pid === me.pid) stateOf(db).delete(KEY);
      } catch {
        // the database may already be closed
      }
    },
  };
}

/** This database's instance id (labels its containers); made once and kept. */
export function instanceId(db: Db): string {
  let id = getState(db, 'instance_id');
  if (!id) {
    id = randomUUID().slice(0, 8);
    setState(db, 'instance_id', id);
  }
  return id;
}
