import { join } from 'node:path';
import { afterEach } from 'vitest';
import { loadConfig, type Config } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import type { StartOptions } from '../../gated/base.js';
import type { Runtime } from '../../queue/runtime/types.js';
import { openDatabase, type Db } from '../../store/db.js';
import { tempDir } from './db.js';
import { inProcessGateds } from './in-process.js';
import { until } from './process.js';

// Each running gated with the grace its runs get when it is closed.
const running = new Map<Gated, number>();
// The test's local platform servers (closedAfterGateds), closed once its gateds are.
const servers = new Set<{ close(): Promise<void> }>();
// Registered after db.ts's cleanup (imported above), so it runs first: each gated is closed before its
// folder is removed. A test file's own afterEach hooks, registered later, run before this one.
afterEach(async () => {
  const closing = [...running].map(([g, graceMs]) => closeTestGated(g, graceMs));
  // Every gated and server is closed even when one fails to; the first failure then fails the test.
  const results = await Promise.allSettled(closing);
  results.push(...(await Promise.allSettled([...servers].map((s) => s.close()))));
  servers.clear();
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
});

/**
 * Closes `server`, a local platform server of test/infra/, after the test, once every gated the test
 * started is closed: the channels stop against a live server (Telegram's stop confirms its offset with
 * one more getUpdates; Discord's and Slack's clients close their sockets on it). Returns `server`.
 */
export function closedAfterGateds<S extends { close(): Promise<void> }>(server: S): S {
  servers.add(server);
  return server;
}

/** How a test's gated starts: startGated's options, with the settings it needs over the defaults. */
export interface TestGatedOptions extends Omit<StartOptions, 'config'> {
  /**
   * Settings (the variables of .env.example) over the defaults: a database and a groups folder in a fresh
   * temporary folder, HTTP on an ephemeral port, the process runtime with the example agent.
   */
  env?: Record<string, string>;
  /** How long runs still in flight get when the gated is closed after the test. Default 1000 ms. */
  graceMs?: number;
  /**
   * Rows the database has before gated starts (groups, routes), written on a connection of their own as
   * an operator's sqlite3 would, and closed before the start.
   */
  seed?: (db: Db, config: Config) => void;
  /** The runtime made from the configuration (a test's own engine, the groups folder); replaces `runtime`. */
  runtimeFor?: (config: Config) => Runtime;
}

/**
 * Starts a whole gated for one test, with quiet logs, and closes it after the test (a test that closes it
 * itself, to restart on the same database, uses closeTestGated). Channels come from the settings unless
 * `channels` replaces them (`[]`: the web chat only).
 */
export async function startTestGated(opts: TestGatedOptions = {}): Promise<Gated> {
  const { env = {}, graceMs = 1000, seed, runtimeFor, ...start } = opts;
  const dir = tempDir();
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    // Never the checkout's ./data/config: a test's voice.json there made every later run's demo speak.
    GATED_CONFIG_DIR: join(dir, 'config'),
    GATED_HTTP_PORT: '0',
    ...env,
  });
  if (seed) {
    const db = openDatabase(config.db);
    try {
      seed(db, config);
    } finally {
      db.close();
    }
  }
  const runtime = runtimeFor?.(config);
  const g = await startGated({ log: silentLogger(), ...start, ...(runtime ? { runtime } : {}), config });
  running.set(g, graceMs);
  inProcessGateds.add(g);
  return g;
}

/** Closes a gated started by startTestGated before the test ends; runs still in flight get `graceMs`. */
export async function closeTestGated(g: Gated, graceMs = running.get(g) ?? 1000): Promise<void> {
  if (!running.delete(g)) return;
  inProcessGateds.delete(g);
  await g.close(graceMs);
}

/**
 * The whole gated as `npm start` runs it, for the web chat: the process runtime (the example agent unless
 * `env` names another), the demo group, no platform channel, a fast poll; runs get 2 s when it closes.
 */
export function startDemoGated(env: Record<string, string> = {}): Promise<Gated> {
  return startTestGated({
    demo: true,
    channels: [],
    graceMs: 2000,
    env: { GATED_RUNTIME: 'process', GATED_POLL_MS: '50', ...env },
  });
}

/** GATED_AGENT_CMD of test/agents/files-agent.mjs: slow, streaming drafts, reading and writing files. */
export const FILES_AGENT_CMD = 'node "$GATED_HOME/test/agents/files-agent.mjs"';

/** A run's row in session_log as the tests read it. */
export interface EndedRun {
  id: number;
  result: string;
  started_at: string;
  ended_at: string;
  idle_ms: number | null;
}

/** Waits until the run that took message `id` has ended (after its idle timeout) and returns its row. */
export function endedRunOf(g: Gated, id: number, ms: number): Promise<EndedRun> {
  const stmt = g.db.prepare(
    `SELECT l.id, l.result, l.started_at, l.ended_at, l.idle_ms
       FROM session_log l JOIN messages m ON m.run_id = l.id WHERE m.id = ? AND l.result IS NOT NULL`,
  );
  return until(() => stmt.get(id) as EndedRun | undefined, ms, 'the run to end after its idle timeout');
}
