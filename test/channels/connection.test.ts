import { describe, expect, it } from 'vitest';
import type { Sleep } from '../../core/backoff.js';
import { silentLogger } from '../../core/log.js';
import { Connection } from '../../channels/connection.js';

class Refused extends Error {}

function connection(sleep: Sleep) {
  return new Connection({
    platform: 'test',
    log: silentLogger(),
    refused: (err) => err instanceof Refused,
    refusedWhat: 'the token',
    sleep,
    backoff: { baseMs: 10, maxMs: 10, random: () => 0 },
  });
}

describe('a channel connection at start', () => {
  it('a refusal fails the start and nothing goes on trying', async () => {
    let tries = 0;
    const c = connection(async () => undefined);
    await expect(
      c.open(async () => {
        tries += 1;
        throw new Refused('bad token');
      }),
    ).rejects.toThrow('bad token');
    expect(c.busy).toBe(false);
    await c.close();
    expect(tries).toBe(1);
  });

  it('an unreachable platform is tried again in the background; then runs once connected', async () => {
    const waits: number[] = [];
    const c = connection(async (ms) => void waits.push(ms));
    let tries = 0;
    let ran: () => void = () => undefined;
    const then = new Promise<void>((resolve) => (ran = resolve));
    await c.open(
      async () => {
        tries += 1;
        if (tries < 3) throw new Error('ECONNREFUSED');
      },
      async () => ran(),
    );
    // open resolved after the first try, before the retries.
    expect(c.busy).toBe(true);
    await then;
    expect(tries).toBe(3);
    expect(waits).toEqual([5, 5]);
    await c.close();
    expect(c.busy).toBe(false);
  });

  it('a refusal during the retries stops them; then never runs', async () => {
    const c = connection(async () => undefined);
    let tries = 0;
    let thenRan = false;
    await c.open(
      async () => {
        tries += 1;
        throw tries < 2 ? new Error('ECONNREFUSED') : new Refused('revoked');
      },
      async () => void (thenRan = true),
    );
    await c.close();
    expect(tries).toBe(2);
    expect(thenRan).toBe(false);
  });

  it('close during a wait stops the retries and waits for them', async () => {
    let waiting: () => void = () => undefined;
    const inWait = new Promise<void>((resolve) => (waiting = resolve));
    const sleep: Sleep = (_ms, signal) =>
      new Promise<void>((resolve) => {
        waiting();
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    const c = connection(sleep);
    let tries = 0;
    let thenRan = false;
    await c.open(
      async () => {
        tries += 1;
        throw new Error('ECONNREFUSED');
      },
      async () => void (thenRan = true),
    );
    await inWait;
    await c.close();
    expect(c.signal.aborted).toBe(true);
    expect(tries).toBe(1);
    expect(thenRan).toBe(false);
  });

  it('a first try that connects runs then at once, and close waits for it', async () => {
    const c = connection(async () => undefined);
    let finished = false;
    await c.open(
      async () => undefined,
      async () => {
        await new Promise<void>((resolve) => c.signal.addEventListener('abort', () => resolve()));
        finished = true;
      },
    );
    expect(finished).toBe(false);
    await c.close();
    expect(finished).toBe(true);
  });
});
