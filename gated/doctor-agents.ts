import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import type { Config } from '../core/config.js';
import { PACKAGE_ROOT } from '../core/paths.js';
import { openFile } from '../store/db.js';
import type { Finding } from './doctor.js';

/**
 * The bundled agents with packages of their own (agents/claude, agents/codex): the root `npm ci` leaves
 * their SDKs out, so a process-runtime command that runs one needs `npm run agents:install` first. Doctor
 * names the missing packages before the first run fails on them.
 */
const BUNDLED = /(\S*?)agents\/(claude|codex)\/agent\.mjs/;

/** The commands runs may start on the process runtime, each with the setting or row it comes from. */
function commandsInUse(config: Config): { command: string; from: string }[] {
  const commands = [{ command: config.agentCmd, from: 'GATED_AGENT_CMD' }];
  if (!existsSync(config.db)) return commands;
  try {
    const db = openFile(config.db, { readonly: true });
    try {
      const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).pluck().all();
      if (tables.includes('registered_groups')) {
        const codex = db.prepare(`SELECT 1 FROM registered_groups WHERE agent = 'codex' LIMIT 1`).get();
        if (codex) commands.push({ command: config.codexCmd, from: 'GATED_CODEX_CMD' });
      }
      if (tables.includes('agent_profiles')) {
        const rows = db
          .prepare(`SELECT name, command FROM agent_profiles WHERE command IS NOT NULL ORDER BY name`)
          .all() as { name: string; command: string }[];
        for (const r of rows) commands.push({ command: r.command, from: `agent profile ${r.name}` });
      }
    } finally {
      db.close();
    }
  } catch {
    // The database finding says what is wrong with the file; the configured commands are still checked.
  }
  return commands;
}

/** True when `name` is installed where Node would find it from `dir` (its node_modules or a parent's). */
function installedFrom(dir: string, name: string): boolean {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules', name, 'package.json'))) return true;
    if (dirname(d) === d) return false;
  }
}

/**
 * Whether the bundled agents that configured commands run (GATED_AGENT_CMD, GATED_CODEX_CMD when a group
 * names codex, agent profiles' commands) have their packages installed. None when no command runs one
 * (the example agent needs nothing) or runs go to containers (the images carry their own). `home` is where
 * `$GATED_HOME` points (the package root).
 */
export function bundledAgentsFinding(config: Config, home: string = PACKAGE_ROOT): Finding | undefined {
  if (config.runtime !== 'process') return undefined;
  const checked: string[] = [];
  for (const { command, from } of commandsInUse(config)) {
    const m = BUNDLED.exec(command.replace(/\$\{?GATED_HOME\}?/g, home));
    if (!m) continue;
    const dir = join(m[1]!.replace(/^["']/, ''), 'agents', m[2]!);
    if (!isAbsolute(dir) || !existsSync(join(dir, 'package.json'))) continue;
    const wanted = Object.keys(
      (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies?: object })
        .dependencies ?? {},
    );
    const missing = wanted.filter((name) => !installedFrom(dir, name));
    if (missing.length > 0) {
      const fix =
        dir === join(home, 'agents', m[2]!)
          ? `run 'npm run agents:install' in ${home} (or 'npm ci --prefix ${dir}')`
          : `run 'npm ci --prefix ${dir}'`;
      return {
        name: 'agents',
        status: 'fail',
        detail: `${from} runs agents/${m[2]} but ${missing.join(', ')} is not installed in ${dir}`,
        fix,
      };
    }
    checked.push(`agents/${m[2]} (${from})`);
  }
  if (checked.length === 0) return undefined;
  return {
    name: 'agents',
    status: 'ok',
    detail: `packages installed for ${[...new Set(checked)].join(', ')}`,
  };
}
