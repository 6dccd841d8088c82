/**
 * A real local atproto network for the Bluesky tests: PLC, PDS and the AppView (which the notifications
 * need) from `@atproto/dev-env`, on a PostgreSQL and a Redis this module starts on loopback. dev-env lives
 * in this folder's own node_modules (pinned for Node 20, installed by scripts/setup.d/30-atproto.sh), so it
 * is loaded at run time and the root package stays light.
 *
 * The three servers are put together here from dev-env's own parts the way its TestNetwork does, without
 * what TestNetwork adds that no test here uses: the Ozone moderation service (a second schema of
 * PostgreSQL migrations and its daemon), a second PDS that only hosts Ozone's and the lexicon authority's
 * accounts, and their records. That was three quarters of the network's start (12 s against 3 s of wall
 * time at load 14, 2.3 s against 0.5 s of CPU), paid by every Bluesky file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AtpAgent } from '@atproto/api';
import { afterAll, beforeAll } from 'vitest';
import { startPostgres, type PostgresServer } from '../postgres.js';
import { freePort } from './proc.js';
import { startRedis, type RedisServer } from '../redis.js';

const HERE = dirname(fileURLToPath(import.meta.url));

/** The parts of dev-env these tests use. */
interface DevEnvPds {
  url: string;
  ctx: { sequencer: { curr(): Promise<number | null> } };
  processAll(): Promise<void>;
  close(): Promise<void>;
}
interface DevEnvBsky {
  url: string;
  ctx: { cfg: { serverDid: string } };
  sub: { processAll(): Promise<void>; runner: { getCursor(): Promise<number | undefined> } };
  close(): Promise<void>;
}
interface DevEnvModule {
  TestPlc: { create(params: object): Promise<{ url: string; close(): Promise<void> }> };
  TestPds: { create(params: object): Promise<DevEnvPds> };
  TestBsky: { create(params: object): Promise<DevEnvBsky> };
  mockNetworkUtilities(pds: DevEnvPds, bsky: DevEnvBsky): void;
}

/** The network's servers. */
interface DevEnvNetwork {
  pds: DevEnvPds;
  bsky: DevEnvBsky;
  plc: { url: string };
  /** Waits until the AppView has indexed everything the PDS has emitted, at most `timeoutMs`. */
  processAll(timeoutMs: number): Promise<void>;
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
 * Starts PostgreSQL, Redis and the network (about 3 s once the servers are up). `schema` names the
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
    // The PDS's blob store and data folders and the AppView's image cache are made in the temp folder at
    // create: in a private one for this network, removed after it (the file's worker is its own process).
    const scratch = mkdtempSync(join(tmpdir(), 'gated-atproto-'));
    stops.push(async () => rmSync(scratch, { recursive: true, force: true }));
    const before = process.env.TMPDIR;
    process.env.TMPDIR = scratch;
    let dev: DevEnvNetwork;
    try {
      dev = await createNetwork(devEnv, pg.url, redis.host, schema, stops);
    } finally {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    }
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

/**
 * PLC, the AppView and the PDS, wired as dev-env's TestNetwork wires them (the AppView follows the PDS's
 * firehose; the PDS proxies app.bsky calls to the AppView; both resolve the PDS's handles and DIDs
 * locally). Each server's stop is pushed onto `stops` as soon as it runs.
 */
async function createNetwork(
  devEnv: DevEnvModule,
  dbPostgresUrl: string,
  redisHost: string,
  schema: string,
  stops: Array<() => Promise<void>>,
): Promise<DevEnvNetwork> {
  const plc = await devEnv.TestPlc.create({});
  stops.push(() => plc.close());
  const pdsPort = await freePort();
  const bsky = await devEnv.TestBsky.create({
    plcUrl: plc.url,
    pdsPort,
    repoProvider: `ws://localhost:${pdsPort}`,
    dbPostgresSchema: `appview_${schema}`,
    dbPostgresUrl,
    redisHost,
  });
  stops.push(() => bsky.close());
  const pds = await devEnv.TestPds.create({
    port: pdsPort,
    didPlcUrl: plc.url,
    bskyAppViewUrl: bsky.url,
    bskyAppViewDid: bsky.ctx.cfg.serverDid,
  });
  stops.push(() => pds.close());
  // Before any event flows from the PDS, so that no handle or DID is resolved against the real network.
  devEnv.mockNetworkUtilities(pds, bsky);
  return {
    pds,
    bsky,
    plc,
    // TestNetwork.processAll without Ozone: the PDS's queue, then the AppView's subscription up to the
    // PDS's newest event (it may say it is done before the PDS has even emitted that event).
    async processAll(timeoutMs) {
      await pds.processAll();
      const last = await pds.ctx.sequencer.curr();
      if (!last) return;
      const end = Date.now() + timeoutMs;
      for (;;) {
        await bsky.sub.processAll();
        const cursor = await bsky.sub.runner.getCursor();
        if (cursor && cursor >= last) return;
        if (Date.now() > end)
          throw new Error(`the AppView did not index event ${last} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
  };
}

async function createUser(pdsUrl: string, handle: string): Promise<TestUser> {
  const agent = new AtpAgent({ service: pdsUrl });
  const password = `pw-${handle}`;
  const name = handle.split('.')[0]!;
  // createAccount hands back the account's session, and the agent keeps it: no login after it (each login
  // is one more scrypt of the password on the PDS, and every test makes two accounts).
  await agent.createAccount({ handle, password, email: `${name}@example.test` });
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
