import { existsSync, readFileSync } from 'node:fs';

/**
 * Reads KEY=VALUE lines of a .env file into `env` without overriding what is already set. Quotes around a
 * value are removed; `#` starts a comment line.
 */
export function loadDotEnv(path: string, env: Record<string, string | undefined> = process.env): void {
  if (!existsSync(path)) return;
  for (const raw of readFileSync(path, 'utf8').split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line
      .slice(0, eq)
      .trim()
      .replace(/^export\s+/, '');
    let value = line.slice(eq + 1).trim();
    if (/^(['"]).*\1$/.test(value)) value = value.slice(1, -1);
    if (env[key] === undefined) env[key] = value;
  }
}
