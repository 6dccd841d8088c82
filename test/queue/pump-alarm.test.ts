import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { PumpAlarm } from '../../queue/pump-alarm.js';

beforeEach(() => vi.useFakeTimers({ now: 1_000 }));
afterEach(() => vi.useRealTimers());

it('rings once at the earliest deadline, drops what was due, and rings again for the rest', async () => {
  const rings: number[] = [];
  const alarm = new PumpAlarm(Date.now, () => rings.push(Date.now()));
  alarm.set('backoff', 1_500);
  alarm.soonest('lock', 1_002);
  alarm.soonest('lock', 1_400); // a later wish keeps the earlier deadline
  alarm.soonest('grace', 1_100);
  await vi.advanceTimersByTimeAsync(1);
  expect(rings).toEqual([]);
  await vi.advanceTimersByTimeAsync(1);
  expect(rings).toEqual([1_002]);
  await vi.advanceTimersByTimeAsync(98);
  expect(rings).toEqual([1_002, 1_100]);
  // set replaces: the backoff moved later, then away.
  alarm.set('backoff', 1_800);
  await vi.advanceTimersByTimeAsync(500);
  expect(rings).toEqual([1_002, 1_100]);
  alarm.set('backoff', null);
  await vi.advanceTimersByTimeAsync(1_000);
  expect(rings).toEqual([1_002, 1_100]);
});

it('rings by the time it was armed for, whatever an injected clock says, and clear silences it', async () => {
  const rings: string[] = [];
  const frozen = () => 0; // a clock that never moves
  const alarm = new PumpAlarm(frozen, () => rings.push('rang'));
  alarm.set('hold', 50);
  await vi.advanceTimersByTimeAsync(50);
  expect(rings).toEqual(['rang']);
  // The deadline was dropped though the clock still says 0: no ringing at once, again and again.
  await vi.advanceTimersByTimeAsync(1_000);
  expect(rings).toEqual(['rang']);
  alarm.set('failure', 10);
  alarm.clear();
  await vi.advanceTimersByTimeAsync(1_000);
  expect(rings).toEqual(['rang']);
  expect(vi.getTimerCount()).toBe(0);
});
