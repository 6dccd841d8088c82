import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createSignals } from '../../core/signals.js';
import { createWorker, type Step, type WorkerOptions } from '../../core/worker.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A worker over `step` that counts its steps. */
function counted(step: Step = () => undefined, over: Partial<WorkerOptions> = {}) {
  let steps = 0;
  const worker = createWorker({
    name: 'test',
    log: silentLogger(),
    step: (signal) => {
      steps += 1;
      return step(signal);
    },
    ...over,
  });
  return { worker, steps: () => steps };
}

describe('worker driver', () => {
  it('runs at start, on the interval, and coalesces wakes that arrive while a step runs', async () => {
    let release: () => void = () => {};
    const slow = () => new Promise<void>((r) => (release = r));
    const { worker, steps } = counted(slow, { intervalMs: 1000 });
    worker.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(steps()).toBe(1);
    for (let i = 0; i < 10; i++) worker.wake();
    release();
    await vi.advanceTimersByTimeAsync(0);
    // Ten wakes during the step make exactly one more step, at once.
    expect(steps()).toBe(2);
    release();
    await vi.advanceTimersByTimeAsync(999);
    expect(steps()).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(steps()).toBe(3);
    release();
    await worker.stop();
  });

  it('runs again at the time a step asks for, before the interval', async () => {
    const { worker, steps } = counted(() => Date.now() + 300, { intervalMs: 60_000 });
    worker.start();
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(299);
    expect(steps()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(steps()).toBe(2);
    await worker.stop();
  });

  it('backs off while steps fail, ignores wakes meanwhile, and reports health', async () => {
    let fail = true;
    const { worker, steps } = counted(
      () => {
        if (fail) throw new Error('disk is full');
      },
      { intervalMs: 100 },
    );
    worker.start();
    for (let t = 0; t < 10_000; t += 10) {
      worker.wake();
      await vi.advanceTimersByTimeAsync(10);
    }
    // 100, 200, 400, … 6,400 ms: 7 steps in 10 s whatever the wakes.
    expect(steps()).toBe(7);
    expect(worker.health()).toMatchObject({ failures: 7, failing: 'disk is full' });
    fail = false;
    await vi.advanceTimersByTimeAsync(12_800);
    expect(worker.health()).toMatchObject({ failures: 0, failing: undefined });
    await worker.stop();
  });

  it('stop() waits for the step in flight and no step starts after it', async () => {
    let ended = false;
    const { worker, steps } = counted(
      (signal) =>
        new Promise<void>((r) =>
          signal.addEventListener('abort', () => {
            ended = true;
            r();
          }),
        ),
      { intervalMs: 10 },
    );
    worker.start();
    await vi.advanceTimersByTimeAsync(0);
    await worker.stop();
    expect(ended).toBe(true);
    worker.wake();
    worker.runNow();
    await vi.advanceTimersByTimeAsync(1000);
    expect(steps()).toBe(1);
  });

  it('runNow runs a synchronous step before start, and a signal wakes its listener', async () => {
    const signals = createSignals();
    const { worker, steps } = counted();
    worker.runNow();
    expect(steps()).toBe(1);
    worker.start();
    signals.queued.on(() => worker.wake());
    await vi.advanceTimersByTimeAsync(0);
    expect(steps()).toBe(2);
    signals.queued.fire();
    await vi.advanceTimersByTimeAsync(0);
    expect(steps()).toBe(3);
    await worker.stop();
  });

  it('waits the delay a failed step chooses (a rate limit), else the backoff, and wakes wait for it', async () => {
    const errors: unknown[] = [];
    let outcome: 'limited' | 'broken' | 'ok' = 'limited';
    const { worker, steps } = counted(
      () => {
        if (outcome !== 'ok') throw new Error(outcome);
      },
      {
        intervalMs: 100,
        failureDelay: (err, failures) => {
          errors.push([(err as Error).message, failures]);
          return (err as Error).message === 'limited' ? 5000 : undefined;
        },
      },
    );
    worker.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(steps()).toBe(1);
    worker.wake();
    await vi.advanceTimersByTimeAsync(4999);
    expect(steps()).toBe(1);
    outcome = 'broken';
    await vi.advanceTimersByTimeAsync(1);
    expect(steps()).toBe(2);
    // Undefined: the backoff of the second failure in a row, 200 ms.
    await vi.advanceTimersByTimeAsync(199);
    expect(steps()).toBe(2);
    outcome = 'ok';
    await vi.advanceTimersByTimeAsync(1);
    expect(steps()).toBe(3);
    expect(errors).toEqual([
      ['limited', 1],
      ['broken', 2],
    ]);
    expect(worker.health().failures).toBe(0);
    await worker.stop();
  });

  it('startNow resolves once the first step has ended, and its outcome times the next', async () => {
    let release: () => void = () => {};
    let fail = false;
    const { worker, steps } = counted(
      () =>
        new Promise<void>((resolve, reject) => {
          release = () => (fail ? reject(new Error('down')) : resolve());
        }),
      { intervalMs: 1000, failureDelay: () => 7000 },
    );
    let started = false;
    const starting = worker.startNow().then(() => (started = true));
    expect(steps()).toBe(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toBe(false);
    fail = true;
    release();
    await starting;
    expect(worker.health()).toMatchObject({ failures: 1, failing: 'down' });
    await vi.advanceTimersByTimeAsync(6999);
    expect(steps()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(steps()).toBe(2);
    fail = false;
    release();
    await vi.advanceTimersByTimeAsync(1000);
    expect(steps()).toBe(3);
    release();
    await worker.stop();
  });
});
