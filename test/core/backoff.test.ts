import { describe, expect, it } from 'vitest';
import { retryInBackground, type Sleep } from '../../core/backoff.js';

/** A sleep that records each wait and returns at once. */
function recordedSleep() {
  const waits: number[] = [];
  const sleep: Sleep = (ms) => {
    waits.push(ms);
    return Promise.resolve();
  };
  return { waits, sleep };
}

describe('retryInBackground', () => {
  it('waits the backoff before each try until one succeeds, and hands each failure to failed', async () => {
    const { waits, sleep } = recordedSleep();
    const seen: Array<[string, number]> = [];
    let tries = 0;
    await retryInBackground(
      async () => {
        tries += 1;
        if (tries < 3) throw new Error(`down ${tries}`);
      },
      {
        signal: new AbortController().signal,
        sleep,
        backoff: { baseMs: 100, maxMs: 250, random: () => 1 },
        failed: (err, attempt) => {
          seen.push([(err as Error).message, attempt]);
          return 'retry';
        },
      },
    );
    expect(tries).toBe(3);
    expect(waits).toEqual([100, 200, 250]);
    expect(seen).toEqual([
      ['down 1', 1],
      ['down 2', 2],
    ]);
  });

  it('stops when failed gives up, and when the signal aborts during a wait', async () => {
    const { sleep } = recordedSleep();
    let tries = 0;
    await retryInBackground(
      async () => {
        tries += 1;
        throw new Error('refused');
      },
      { signal: new AbortController().signal, sleep, failed: () => 'give up' },
    );
    expect(tries).toBe(1);

    const abort = new AbortController();
    let attempts = 0;
    const stopping: Sleep = async () => abort.abort();
    await retryInBackground(
      async () => {
        attempts += 1;
      },
      { signal: abort.signal, sleep: stopping, failed: () => 'retry' },
    );
    expect(attempts).toBe(0);
  });
});
