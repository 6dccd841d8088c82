import Database from 'better-sqlite3';

/**
 * Counts the SQL statement calls of every better-sqlite3 connection of this process while it is on: each
 * `run`, `get`, `all` and `iterate` of a prepared statement (BEGIN, COMMIT, SAVEPOINT and RELEASE of a
 * transaction function included: better-sqlite3 runs them as statements) and each `exec`. The bench turns it
 * on around a scenario; gated itself has no hook, so it costs nothing outside the bench.
 */
export interface SqlCounter {
  /** Statement calls since the counter started. */
  total(): number;
  /** Calls of transaction control (BEGIN, COMMIT, SAVEPOINT, RELEASE, ROLLBACK) among them. */
  control(): number;
  /** The `n` most called statements, their text cut to 80 characters. */
  top(n: number): Array<{ sql: string; calls: number }>;
  /** Puts the methods back. */
  stop(): void;
}

const METHODS = ['run', 'get', 'all', 'iterate'] as const;
const CONTROL = /^\s*(BEGIN|COMMIT|END|SAVEPOINT|RELEASE|ROLLBACK)\b/i;

type Method = (...args: unknown[]) => unknown;

/** Starts counting; call `stop()` when the measured part is over. */
export function countSql(): SqlCounter {
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, Method>;
  probe.close();
  const dbProto = Database.prototype as unknown as Record<string, Method>;
  const calls = new Map<string, number>();
  let total = 0;
  const note = (sql: string) => {
    total += 1;
    calls.set(sql, (calls.get(sql) ?? 0) + 1);
  };
  const saved = METHODS.map((m) => [m, proto[m]!] as const);
  for (const [m, orig] of saved) {
    proto[m] = function (this: { source: string }, ...args: unknown[]) {
      note(this.source);
      return orig.apply(this, args);
    };
  }
  const exec = dbProto.exec!;
  dbProto.exec = function (this: unknown, sql: unknown) {
    note(String(sql));
    return exec.call(this, sql);
  };
  return {
    total: () => total,
    control: () => [...calls].reduce((a, [sql, n]) => a + (CONTROL.test(sql) ? n : 0), 0),
    top: (n) =>
      [...calls]
        .sort((a, b) => b[1] - a[1])
        .slice(0, n)
        .map(([sql, c]) => ({ sql: sql.replace(/\s+/g, ' ').trim().slice(0, 80), calls: c })),
    stop() {
      for (const [m, orig] of saved) proto[m] = orig;
      dbProto.exec = exec;
    },
  };
}
