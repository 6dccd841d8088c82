/**
 * The bench's event-loop delay (bench/loop-delay.ts): the lateness of a timer, without the timer's own
 * period that Node's histogram counts in.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { monitorLoopDelay } from '../../bench/loop-delay.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('event-loop delay', () => {
  it('is about 0 on a loop that waits for nothing, not the 10 ms period of its timer', async () => {
    // Node's own histogram over the same loop, beside it: it reads the period itself (about 10 ms) plus
    // whatever lateness a loaded machine adds, which both then see alike.
    const raw = monitorEventLoopDelay({ resolution: 10 });
    raw.enable();
    const d = monitorLoopDelay(10);
    await sleep(400);
    d.stop();
    raw.disable();
    expect(d.percentile(50)).toBeGreaterThanOrEqual(0);
    expect(raw.percentile(50) / 1e6 - d.percentile(50)).toBeGreaterThan(5);
  });

  it('shows a turn that blocks the loop as about that long', async () => {
    const d = monitorLoopDelay(10);
    await sleep(50);
    const until = performance.now() + 80;
    while (performance.now() < until) {
      // The loop is held, as a long synchronous turn would hold it.
    }
    await sleep(50);
    d.stop();
    expect(d.max()).toBeGreaterThan(60);
    // Without the period taken off, the figure would be 80 ms plus up to 10 ms, the time left of the timer's period.
    expect(d.max()).toBeLessThan(200);
  });
});
