import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { loadConfig, loadDotEnv, type Config } from '../core/config.js';
import { UsageError } from '../core/errors.js';
import { openDatabase, openForReading, type Db } from '../store/db.js';

/** What every CLI command starts from: the resolved configuration and, opened lazily, the database. */
export interface CliContext {
  config: Config;
  /**
   * The database, opened on first use. A database that does not exist is refused with a UsageError naming
   * the path (a mistyped `--db` must not create an empty database and report on it); only the commands that
   * exist to create one (`init`, `run`, `chat`) pass `{ create: true }`. Commands that only read pass
   * `{ readOnly: true }`: a database this user may only read is then opened read-only (`openForReading`).
   */
  db(opts?: { create?: boolean; readOnly?: boolean }): Db;
  out(line: string): void;
  close(): void;
}

/**
 * Builds the context of one command: `.env` in the working directory is read (without overriding the
 * environment), `--db` beats GATED_DB beats ./data/gated.db.
 */
export function cliContext(
  cmd: Command,
  out: (line: string) => void = (l) => process.stdout.write(l + '\n'),
) {
  loadDotEnv(resolve('.env'));
  const opts = cmd.optsWithGlobals<{ db?: string }>();
  const env = { ...process.env, ...(opts.db ? { GATED_DB: opts.db } : {}) };
  const config = loadConfig(env);
  let db: Db | undefined;
  const ctx: CliContext = {
    config,
    db: (opts) => {
      if (!db && !opts?.create && config.db !== ':memory:' && !existsSync(config.db)) {
        throw new UsageError(
          `no database at ${config.db}: start gated or run 'gated init' to create it, or pass --db PATH`,
        );
      }
      return (db ??= opts?.readOnly ? openForReading(config.db) : openDatabase(config.db));
    },
    out,
    close: () => {
      if (db?.open) db.close();
    },
  };
  return ctx;
}

/** Wraps a command action: the context is closed afterwards, whatever happens. */
export function action<A extends unknown[]>(
  fn: (ctx: CliContext, ...args: A) => void | number | Promise<void | number>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const cmd = args[args.length - 1] as Command;
    const ctx = cliContext(cmd);
    try {
      const code = await fn(ctx, ...(args.slice(0, -1) as A));
      if (typeof code === 'number') process.exitCode = code;
    } finally {
      ctx.close();
    }
  };
}

/** Parses a whole number argument or throws a UsageError naming it. */
export function intArg(name: string, raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n))
    throw new UsageError(`${name} must be an integer, got '${raw}'`);
  return n;
}
