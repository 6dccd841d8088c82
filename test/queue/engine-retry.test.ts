import { describe, expect, it } from 'vitest';
import { ENGINE_RETRY_CAP_MS, engineRetryDelayMs } from '../../queue/settle.js';
import { EngineError, unreachableError } from '../../queue/runtime/engine.js';

describe('runs while the engine is unreachable', () => {
  it('are tried again after half the outage so far, between 1 s and 30 s, with jitter', () => {
    const top = () => 0.999999;
    const bottom = () => 0;
    expect(engineRetryDelayMs(0, top)).toBe(1000);
    expect(engineRetryDelayMs(0, bottom)).toBe(500);
    expect(engineRetryDelayMs(10_000, top)).toBe(5000);
    expect(engineRetryDelayMs(10 * 60_000, top)).toBe(ENGINE_RETRY_CAP_MS);
    expect(engineRetryDelayMs(10 * 60_000, bottom)).toBe(ENGINE_RETRY_CAP_MS / 2);
  });

  it('are told apart from the engine’s own answers: only a connection that fails is an outage', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED /run/docker.sock'), {
      code: 'ECONNREFUSED',
      syscall: 'connect',
    });
    const noSocket = Object.assign(new Error('connect ENOENT /run/docker.sock'), {
      code: 'ENOENT',
      syscall: 'connect',
    });
    const e = unreachableError(refused, 'unix:///run/docker.sock');
    expect(e).toBeInstanceOf(EngineError);
    expect(e).toMatchObject({ problem: 'unreachable' });
    expect(e!.message).toBe('the engine at unix:///run/docker.sock cannot be reached (ECONNREFUSED)');
    expect(unreachableError(noSocket, 'x')?.problem).toBe('unreachable');
    // The engine answered: no such image, a conflict; a file missing on this side is no outage either.
    const notFound = Object.assign(new Error('no such image'), { statusCode: 404 });
    const missingFile = Object.assign(new Error('ENOENT: open'), { code: 'ENOENT', syscall: 'open' });
    expect(unreachableError(notFound, 'x')).toBeUndefined();
    expect(unreachableError(missingFile, 'x')).toBeUndefined();
    expect(unreachableError(new EngineError('image_missing', 'no image'), 'x')).toBeUndefined();
  });
});
