import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { claimOwner, liveOwner, processStart } from '../../store/owner.js';
import { setState } from '../../store/state.js';
import { freshDb } from '../helpers/db.js';

const children: Array<{ kill(): boolean }> = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill();
});

/** A live process that is not a gated: its pid is what a dead owner's pid may have become. */
function otherProcess(): number {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  return child.pid!;
}

function recordOwner(db: ReturnType<typeof freshDb>['db'], pid: number, since: string | undefined) {
  const owner = {
    token: 't',
    pid,
    host: hostname(),
    started: new Date().toISOString(),
    heartbeat: Date.now(),
  };
  setState(db, 'owner', JSON.stringify(since === undefined ? owner : { ...owner, since }));
}

describe('the owner of a database', () => {
  it('is still the owner while its process lives, so a second gated is refused', () => {
    const { db } = freshDb();
    const pid = otherProcess();
    recordOwner(db, pid, processStart(pid));
    expect(liveOwner(db)?.pid).toBe(pid);
    expect(() => claimOwner(db)).toThrow(/another gated \(pid \d+/);
  });

  it('is gone when its pid now names a process started at another time (a pid reused after kill -9)', () => {
    const { db } = freshDb();
    const pid = otherProcess();
    const since = processStart(pid)!;
    expect(since).toMatch(/^\d+$/);
    recordOwner(db, pid, String(Number(since) - 1));
    expect(liveOwner(db)).toBeUndefined();
    const mine = claimOwner(db);
    expect(liveOwner(db)).toMatchObject({ pid: process.pid, since: processStart(process.pid) });
    mine.release();
  });

  it('falls back to the pid alone for a record written without a start time', () => {
    const { db } = freshDb();
    const pid = otherProcess();
    recordOwner(db, pid, undefined);
    expect(liveOwner(db)?.pid).toBe(pid);
  });
});
