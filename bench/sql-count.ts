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
  /** Calls of COMMIT (or END) among them: the write transactions that reached the WAL, and read ones. */
  commits(): number;
  /** The `n` most called (timed: costliest) statements, their text cut to 80 characters, ms when timed. */
  top(n: number): Array<{ sql: string; calls: number; ms?: number }>;
  /** Puts the methods back. */
  stop(): void;
}

const METHODS = ['run', 'get', 'all', 'iterate'] as const;
const CONTROL = /^\s*(BEGIN|COMMIT|END|SAVEPOINT|RELEASE|ROLLBACK)\b/i;

type Method = (...args: unknown[]) => unknown;

/** Starts counting (`timed`: each statement's time too); call `stop()` when the measured part is over. */
export function countSql(opts: { timed?: boolean } = {}): SqlCounter {
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, Method>;
  probe.close();
  const dbProto = Database.prototype as unknown as Record<string, Method>;
  const calls = new Map<string, number>();
  const ns = new Map<string, bigint>();
  let total = 0;
  const note = (sql: string) => {
    total += 1;
    calls.set(sql, (calls.get(sql) ?? 0) + 1);
  };
  const saved = METHODS.map((m) => [m, proto[m]!] as const);
  for (const [m, orig] of saved) {
    proto[m] = opts.timed
      ? function (this: { source: string }, ...args: unknown[]) {
          note(this.source);
          const t0 = process.hrtime.bigint();
          try {
            return orig.apply(this, args);
          } finally {
            ns.set(this.source, (ns.get(this.source) ?? 0n) + process.hrtime.bigint() - t0);
          }
        }
      : function (this: { source: string }, ...args: unknown[]) {
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
    commits: () => [...calls].reduce((a, [sql, n]) => a + (/^\s*(COMMIT|END)\b/i.test(sql) ? n : 0), 0),
    top: (n) =>
      [...calls]
        // Timed: the costliest first; else the most called.
        .sort((a, b) => (opts.timed ? Number((ns.get(b[0]) ?? 0n) - (ns.get(a[0]) ?? 0n)) : b[1] - a[1]))
        .slice(0, n)
        .map(([sql, c]) => ({
          sql: sql.replace(/\s+/g, ' ').trim().slice(0, 80),
          calls: c,
          ...(opts.timed ? { ms: Math.round(Number(ns.get(sql) ?? 0n) / 1e4) / 100 } : {}),
        })),
    stop() {
      for (const [m, orig] of saved) proto[m] = orig;
      dbProto.exec = exec;
    },
  };
}
