import { UsageError } from './errors.js';

/** The environment settings are read from (process.env, or a test's own object). */
export type Env = Record<string, string | undefined>;

/** An integer setting: `dflt` when unset or blank; a named UsageError when not an integer of at least `min`. */
export function int(env: Env, key: string, dflt: number, min = 0): number {
  const raw = env[key];
  if (raw === undefined || raw.trim() === '') return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new UsageError(`${key} must be an integer >= ${min}, got '${raw}'`);
  return n;
}

/** A text setting, trimmed; undefined when unset or blank. */
export function str(env: Env, key: string): string | undefined {
  const v = env[key];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

/** A comma-separated list setting, each entry trimmed (and lower-cased with `lower`), empty ones dropped. */
export function list(env: Env, key: string, dflt = '', lower = false): string[] {
  return (str(env, key) ?? dflt)
    .split(',')
    .map((s) => (lower ? s.trim().toLowerCase() : s.trim()))
    .filter(Boolean);
}
