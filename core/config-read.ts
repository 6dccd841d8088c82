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

/** A switch: 1 on, 0 off, `dflt` when unset; anything else is a named error, not a guess. */
export function onOff(env: Env, key: string, dflt: boolean): boolean {
  const v = str(env, key);
  if (v === undefined) return dflt;
  if (v === '1' || v === '0') return v === '1';
  throw new UsageError(`${key} must be 0 or 1, got '${v}'`);
}
