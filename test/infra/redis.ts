/**
 * A throwaway Redis for tests on 127.0.0.1 and a free port, with persistence off and its working folder in
 * a temporary directory that `stop` removes.
 */
import { freePort, inTempDir, spawnUntilReady } from './atproto/proc.js';

/** A running Redis; `stop` ends it by pid. */
export interface RedisServer {
  /** `127.0.0.1:PORT`, the form REDIS_HOST takes. */
  readonly host: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts redis-server on a free loopback port. Rejects with its own words if it cannot. */
export function startRedis(): Promise<RedisServer> {
  return inTempDir('gated-redis-', async (dir) => {
    const port = await freePort();
    const proc = await spawnUntilReady(
      'redis-server',
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      /Ready to accept connections/,
      { cwd: dir },
    ).catch((err: Error) => {
      throw /ENOENT/.test(err.message)
        ? new Error('redis-server is not installed: run scripts/setup.d/30-atproto.sh')
        : err;
    });
    return { host: `127.0.0.1:${port}`, port, pid: proc.pid, stop: () => proc.stop() };
  });
}
