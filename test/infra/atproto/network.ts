/**
 * A real local atproto network for the Bluesky tests: PLC, PDS and the AppView (which the notifications
 * need) from `@atproto/dev-env`, on a PostgreSQL and a Redis this module starts on loopback. dev-env lives
 * in this folder's own node_modules (pinned for Node 20, installed by scripts/setup.d/30-atproto.sh), so it
 * is loaded at run time and the root package stays light.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AtpAgent } from '@atproto/api';
import { afterAll, beforeAll } from 'vitest';
import { startPostgres, type PostgresServer } from '../postgres.js';
import { startRedis, type RedisServer } from '../redis.js';

const HERE = dirname(fileURLToPath(import.meta.url));

/** The part of dev-env's TestNetwork these tests use. */
interface DevEnvNetwork {
  pds: { url: string; jwtSecretKey(): import('node:crypto').KeyObject };
  bsky: { url: string };
  plc: { url: string };
  processAll(timeout?: number): Promise<void>;
  close(): Promise<void>;
}

interface DevEnvModule {
  TestNetwork: {
    create(params: { dbPostgresUrl: string; dbPostgresSchema: string }): Promise<DevEnvNetwork>;
  };
}

/** A user account on the local PDS, logged in. */
export interface TestUser {
  did: string;
  handle: string;
  password: string;
  agent: AtpAgent;
}

/** A running local network. `close` stops everything it started, by pid, and removes its data. */
export interface AtprotoNetwork {
  readonly pdsUrl: string;
  readonly appviewUrl: string;
  readonly dev: DevEnvNetwork;
  /** Waits until the AppView has indexed everything the PDS has emitted (notifications are then listable). */
  processAll(): Promise<void>;
  /** Creates an account (handle must end in `.test`; some names such as `bot.test` are reserved). */
  createUser(handle: string): Promise<TestUser>;
  /** Creates an app password for a user, as an operator would for gated. */
  appPassword(user: TestUser, name?: string): Promise<string>;
  close(): Promise<void>;
}

function loadDevEnv(): DevEnvModule {
  const req = createRequire(join(HERE, 'package.json'));
  try {
    return req('@atproto/dev-env') as DevEnvModule;
  } catch (err) {
    throw new Error(
      `@atproto/dev-env cannot be loaded from test/infra/atproto (run scripts/setup.d/31-atproto.npm.sh): ${String(err)}`,
    );
  }
}

/**
 * Starts PostgreSQL, Redis and a dev-env TestNetwork (about 3 s once the servers are up). `schema` names the
 * AppView's PostgreSQL schema: letters and `_` only.
 */
export async function startAtprotoNetwork(schema = 'gated'): Promise<AtprotoNetwork> {
  if (!/^[A-Za-z_]+$/.test(schema)) throw new Error(`AppView schema '${schema}': letters and _ only`);
  const devEnv = loadDevEnv();
  const stops: Array<() => Promise<void>> = [];
  const close = async () => {
    // Every step runs even when an earlier one fails, so no server outlives the suite.
    const errors: unknown[] = [];
    while (stops.length) await stops.pop()!().catch((e: unknown) => errors.push(e));
    if (errors.length) throw errors[0];
  };
  try {
    const pg: PostgresServer = await startPostgres();
    stops.push(() => pg.stop());
    const redis: RedisServer = await startRedis();
    stops.push(() => redis.stop());
    // dev-env reads the Redis address from the environment only.
    process.env.REDIS_HOST = redis.host;
    // The PDS's blob store and data folders and the AppView's image cache are made in the temp folder at
    // create: in a private one for this network, removed after it (the file's worker is its own process).
    const scratch = mkdtempSync(join(tmpdir(), 'gated-atproto-'));
    stops.push(async () => rmSync(scratch, { recursive: true, force: true }));
    const before = process.env.TMPDIR;
    process.env.TMPDIR = scratch;
    let dev: DevEnvNetwork;
    try {
      dev = await devEnv.TestNetwork.create({ dbPostgresUrl: pg.url, dbPostgresSchema: schema });
    } finally {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    }
    stops.push(() => dev.close());
    return {
      pdsUrl: dev.pds.url,
      appviewUrl: dev.bsky.url,
      dev,
      processAll: () => dev.processAll(10_000),
      createUser: (handle) => createUser(dev.pds.url, handle),
      appPassword: async (user, name = 'gated') => {
        const res = await user.agent.com.atproto.server.createAppPassword({ name });
        return res.data.password;
      },
      close,
    };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

async function createUser(pdsUrl: string, handle: string): Promise<TestUser> {
  const agent = new AtpAgent({ service: pdsUrl });
  const password = `pw-${handle}`;
  const name = handle.split('.')[0]!;
  await agent.createAccount({ handle, password, email: `${name}@example.test` });
  await agent.login({ identifier: handle, password });
  return { did: agent.session!.did, handle, password, agent };
}

/**
 * One network for a whole test file: started before its first test, closed after its last. Returns a
 * getter, since the network exists only once the file's tests run.
 */
export function useAtprotoNetwork(schema: string): () => AtprotoNetwork {
  let net: AtprotoNetwork | undefined;
  beforeAll(async () => {
    net = await startAtprotoNetwork(schema);
  });
  afterAll(async () => {
    await net?.close();
  });
  return () => {
    if (!net) throw new Error('the atproto network is not up (used outside a test?)');
    return net;
  };
}
