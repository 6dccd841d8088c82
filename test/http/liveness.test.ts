import { describe, expect, it } from 'vitest';
import {
  DESCRIPTORS_NEAR,
  descriptorHealth,
  descriptorLimit,
  openDescriptors,
} from '../../core/descriptors.js';
import { liveness, OVERDUE_GRACE_MS } from '../../http/liveness.js';
import { freshDb } from '../helpers/db.js';

describe('liveness of the poll loop', () => {
  const at = 1_000_000;
  const check = (lastTickAt: number, pollMs: number) => {
    const { db } = freshDb();
    const loop = { health: () => ({ lastTickAt, failing: undefined, failures: 0 }) };
    return liveness({ db, loop, queue: { active: () => [], overdue: () => [] }, pollMs, now: at }).loop;
  };

  it('counts a loop as stalled after 3 poll intervals', () => {
    expect(check(at - 5_999, 2000)).toBe('ok');
    expect(check(at - 6_001, 2000)).toMatch(/^no completed poll tick for 6001 ms/);
  });

  it('gives a short poll interval at least 2 s: one busy moment of the event loop is not a stall', () => {
    expect(check(at - 400, 100)).toBe('ok');
    expect(check(at - 1_999, 50)).toBe('ok');
    expect(check(at - 2_001, 50)).toMatch(/^no completed poll tick for 2001 ms/);
  });
});

describe('liveness of runs and descriptors', () => {
  const at = 1_000_000;
  const loop = { health: () => ({ lastTickAt: at, failing: undefined, failures: 0 }) };

  it('names runs past their run timeout by more than the grace, and only those', () => {
    const { db } = freshDb();
    const overdue = [
      { runId: 4, byMs: OVERDUE_GRACE_MS },
      { runId: 7, byMs: OVERDUE_GRACE_MS + 12_400 },
    ];
    const checks = liveness({
      db,
      loop,
      queue: { active: () => [], overdue: () => overdue },
      pollMs: 100,
      now: at,
    });
    expect(checks.runs).toBe('1 past their run timeout (run 7 by 42 s)');
    const none = liveness({ db, loop, queue: { active: () => [], overdue: () => [] }, pollMs: 100, now: at });
    expect(none.runs).toBe('ok');
  });

  it('reads this process’s descriptors from /proc: fine now, near exhaustion with a limit just above them', () => {
    expect(descriptorHealth()).toBe('ok');
    const open = openDescriptors();
    expect(open).toBeGreaterThan(2);
    expect(descriptorLimit()).toBeGreaterThan(open);
    const limit = () => Math.floor((open + 1) / DESCRIPTORS_NEAR) - 1;
    expect(descriptorHealth({ limit, open: openDescriptors })).toMatch(/^near exhaustion: \d+ of \d+ open$/);
    const emfile = () => {
      throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
    };
    expect(descriptorHealth({ limit: () => 256, open: emfile })).toBe(
      'exhausted: no descriptor left to open /proc/self/fd (EMFILE, limit 256)',
    );
  });
});
