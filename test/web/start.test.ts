import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../core/paths.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { SseClient } from '../http/sse-client.js';

const started: ChildProcess[] = [];

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

afterEach(async () => {
  for (const child of started.splice(0)) {
    const pgid = child.pid!;
    // npm start runs a shell and node under it: signal the process group we created, by its id.
    if (groupAlive(pgid)) process.kill(-pgid, 'SIGTERM');
    await until(() => !groupAlive(pgid), 15_000, 'npm start to exit').catch(() => undefined);
    if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
  }
});

/** Runs `npm start` (the README's start command) and resolves with the URL it prints. */
function npmStart(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn('npm', ['start'], {
    cwd: PACKAGE_ROOT,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const m = /web chat at (http:\/\/[^\s"]+)/.exec(out);
      if (m) resolve({ child, url: m[1]!, output: () => out });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) =>
      reject(new Error(`npm start exited (${code}) before serving:\n${out.slice(-3000)}`)),
    );
  });
}

describe('npm start', () => {
  it('builds, serves the chat with the demo group, and the example agent answers a message', async () => {
    const dir = tempDir('gated-start-');
    const { child, url } = await npmStart({
      GATED_DB: join(dir, 'gated.db'),
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_HTTP_PORT: '0',
      GATED_POLL_MS: '100',
      GATED_IDLE_TIMEOUT_MS: '1000',
    });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/`)).status).toBe(200);
    const groups = (await (await fetch(`${url}/api/chat/groups`)).json()) as { groups: { folder: string }[] };
    expect(groups.groups.map((g) => g.folder)).toContain('demo');

    const sse = await SseClient.open(`${url}/api/chat/stream?group=demo&topic=start`);
    await sse.waitFor('ready', 1);
    const res = await fetch(`${url}/api/chat/send`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ group: 'demo', topic: 'start', content: 'are you there?' }),
    });
    expect(res.status).toBe(201);
    const replies = async () => {
      const evs = await sse.waitFor('message', 2, 30_000);
      return evs.map((e) => JSON.parse(e.data) as { role: string; content: string });
    };
    const [mine, answer] = await replies();
    expect(mine).toMatchObject({ role: 'user', content: 'are you there?' });
    expect(answer).toMatchObject({ role: 'agent', content: 'echo: are you there?' });
    sse.close();

    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  }, 240_000);
});
