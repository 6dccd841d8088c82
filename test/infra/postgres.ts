/**
 * A throwaway PostgreSQL server for tests: a fresh cluster (`initdb -A trust`) in a temporary folder,
 * listening on 127.0.0.1 and a private socket folder, fsync off. PostgreSQL refuses to run as root, so when
 * the tests are root it runs as the unprivileged `gated-test` user (made by scripts/setup.d/30-atproto.sh)
 * or, failing that, the `postgres` user of the Debian package.
 */
import { chownSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, inTempDir, lookupUser, run, spawnUntilReady } from './atproto/proc.js';

/** A running PostgreSQL; `stop` ends it by pid and removes its data. */
export interface PostgresServer {
  /** `postgresql://postgres@127.0.0.1:PORT/postgres` (trust authentication). */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/** The bin folder of the newest installed PostgreSQL (Debian keeps it off PATH). */
function binDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(join(base, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions[0]) {
    throw new Error(
      'PostgreSQL is not installed (no /usr/lib/postgresql/*/bin): run scripts/setup.d/30-atproto.sh',
    );
  }
  return join(base, versions[0], 'bin');
}

function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const user = lookupUser('gated-test') ?? lookupUser('postgres');
  if (!user)
    throw new Error(
      'tests run as root but neither user gated-test nor postgres exists: run scripts/setup.d/30-atproto.sh',
    );
  return user;
}

/** Starts a fresh PostgreSQL on a free loopback port. Rejects with the server's own words if it cannot. */
export function startPostgres(): Promise<PostgresServer> {
  const bin = binDir();
  const user = runAs();
  return inTempDir('gated-pg-', async (dir) => {
    const data = join(dir, 'data');
    const sock = join(dir, 'sock');
    mkdirSync(sock);
    if (user) {
      chownSync(dir, user.uid, user.gid);
      chownSync(sock, user.uid, user.gid);
    }
    const opts = {
      ...(user ?? {}),
      cwd: dir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: dir },
    };
    await run(
      join(bin, 'initdb'),
      ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync'],
      opts,
    );
    const port = await freePort();
    const settings = [
      'listen_addresses=127.0.0.1',
      'fsync=off',
      'synchronous_commit=off',
      'full_page_writes=off',
    ];
    const proc = await spawnUntilReady(
      'postgres',
      join(bin, 'postgres'),
      [
        '-D',
        data,
        '-k',
        sock,
        '-p',
        String(port),
        ...settings.flatMap((kv) => ['-c', kv]),
        '-c',
        'max_connections=200',
      ],
      /database system is ready to accept connections/,
      opts,
    );
    return {
      url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
      port,
      pid: proc.pid,
      stop: () => proc.stop(),
    };
  });
}
