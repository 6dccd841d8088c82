import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../core/paths.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';

let child: ChildProcess | undefined;
afterEach(async () => {
  if (child && child.exitCode === null) {
    // npm runs gated as a child of its own; signal the whole group so nothing outlives the test.
    process.kill(-child.pid!, 'SIGKILL');
  }
  child = undefined;
});

describe("the README's start command", () => {
  it("npm start serves the web chat and a message gets the example agent's reply", async () => {
    const dir = tempDir();
    child = spawn('npm', ['start', '--silent'], {
      cwd: PACKAGE_ROOT,
      detached: true,
      env: {
        ...process.env,
        GATED_DB: join(dir, 'gated.db'),
        GATED_GROUPS_DIR: join(dir, 'groups'),
        GATED_HTTP_PORT: '0',
        GATED_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no URL printed:\n${output}`)), 120_000);
      const onData = (d: Buffer) => {
        output += String(d);
        const m = /web chat at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      child!.stdout!.on('data', onData);
      child!.stderr!.on('data', onData);
      child!.once('exit', (code) => reject(new Error(`npm start exited ${code}:\n${output}`)));
    });

    const groups = (await (await fetch(`${url}/api/chat/groups`)).json()) as { groups: { folder: string }[] };
    expect(groups.groups.map((g) => g.folder)).toContain('demo');
    const sent = await fetch(`${url}/api/chat/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ group: 'demo', content: 'hi from the README test' }),
    });
    expect(sent.status).toBe(201);
    type Line = { role: string; content: string };
    const answer = await until(
      async () => {
        const h = (await (await fetch(`${url}/api/chat/history?group=demo`)).json()) as { lines: Line[] };
        return h.lines.find((l) => l.role === 'agent');
      },
      20_000,
      "the agent's answer in the history",
    );
    expect(answer.content).toContain('echo: hi from the README test');

    // Stop gated itself (its pid is in the owner row), as an operator's SIGTERM would; npm passes its exit on.
    const db = new Database(join(dir, 'gated.db'), { readonly: true });
    const owner = JSON.parse(
      db.prepare(`SELECT value FROM router_state WHERE key = 'owner'`).pluck().get() as string,
    );
    db.close();
    const exit = new Promise<number | null>((r) => child!.once('exit', (c) => r(c)));
    process.kill(owner.pid, 'SIGTERM');
    expect(await exit).toBe(0);
  }, 180_000);
});
