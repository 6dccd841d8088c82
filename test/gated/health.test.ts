import { describe, expect, it } from 'vitest';
import { liveness } from '../../gated/health.js';
import { freshDb } from '../helpers/db.js';

describe('liveness of the poll loop', () => {
  const at = 1_000_000;
  const check = (lastTickAt: number, pollMs: number) => {
    const { db } = freshDb();
    const loop = { health: () => ({ lastTickAt, failing: undefined, failures: 0 }) };
    return liveness({ db, loop, queue: { active: () => [] }, pollMs, now: at }).loop;
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
