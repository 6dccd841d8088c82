import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { exited, spawnGated, until } from '../helpers/process.js';

const cli = spawnGated;

/** Feeds `lines` to `gated chat`, closes its stdin and collects what it printed until it exits. */
async function chat(env: Record<string, string>, lines: string[]) {
  const child = cli(['chat', 'demo'], env);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += String(d)));
  child.stderr!.on('data', (d) => (err += String(d)));
  child.stdin!.end(lines.map((l) => l + '\n').join(''));
  const code = await exited(child);
  return { code, out, err };
}

function envFor(dir: string): Record<string, string> {
  return {
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_HTTP_PORT: '0',
    GATED_POLL_MS: '100',
    GATED_IDLE_TIMEOUT_MS: '300',
    GATED_LOG_LEVEL: 'warn',
  };
}

describe('gated chat', () => {
  it('runs a gateway in the terminal when none is running and prints the example agent reply', async () => {
    const r = await chat(envFor(tempDir()), ['hello from the terminal', '/ping']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/gated runs in this terminal/);
    // Each reply under its speaker's label: the group's agent, or gated itself (/ping).
    expect(r.out).toMatch(/^demo › echo: hello from the terminal$/m);
    expect(r.out).toMatch(/^gated › pong$/m);
    // Piped input is not a terminal: no prompt is printed.
    expect(r.out).not.toContain('you › ');
  }, 60_000);

  it('talks through a running gated when one owns the database', async () => {
    const dir = tempDir();
    const env = envFor(dir);
    const daemon = cli(['run'], env);
    const db = () => new Database(env.GATED_DB!, { readonly: true, fileMustExist: true });
    await until(
      () => {
        try {
          const d = db();
          const owner = d.prepare(`SELECT value FROM router_state WHERE key = 'owner'`).pluck().get();
          const demo = d.prepare(`SELECT 1 FROM registered_groups WHERE folder = 'demo'`).pluck().get();
          d.close();
          return Boolean(owner && demo);
        } catch {
          return false; // not created yet
        }
      },
      30_000,
      'gated run to start',
    );
    const r = await chat(env, ['through the daemon']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/through the running gated \(pid \d+\)/);
    expect(r.out).toMatch(/shares group demo's main session with its web chat \(web:demo\)/);
    expect(r.out).toMatch(/^demo › echo: through the daemon$/m);
    daemon.kill('SIGTERM');
    expect(await exited(daemon)).toBe(0);
  }, 60_000);

  it('refuses an unknown group with exit 2', async () => {
    const dir = tempDir();
    const child = cli(['chat', 'nope/x'], envFor(dir));
    child.stdin!.end();
    let err = '';
    child.stderr!.on('data', (d) => (err += String(d)));
    const code = await exited(child);
    expect(code).toBe(2);
    expect(err).toMatch(/no group 'nope\/x'/);
  });
});
