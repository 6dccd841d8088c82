/**
 * gated's own image, built offline (docker/build-gated-offline.sh: the layout of docker/gated.Dockerfile on
 * an imported base), run with docker/compose.yaml on a test Docker engine that also runs its agents, and
 * talked to through the web chat. The engine has no bridge (docs/TESTING.md), which is why the compose file
 * uses host networking. Slow by nature: compiling gated and importing its dependencies as an image take
 * most of the time.
 */
import { execFile } from 'node:child_process';
import { chownSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';

const run = promisify(execFile);

/** A TCP port nobody listens on right now (gated listens on it from inside the container). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/** Compose 1.29 (Debian's docker-compose, scripts/setup.d/25-compose.sh) or the docker CLI's plugin. */
async function composeCommand(): Promise<string[]> {
  try {
    await run('docker', ['compose', 'version']);
    return ['docker', 'compose'];
  } catch {
    await run('docker-compose', ['version']).catch(() => {
      throw new Error(
        'neither docker compose nor docker-compose is installed: run scripts/setup.d/25-compose.sh',
      );
    });
    return ['docker-compose'];
  }
}

let engine: TestDockerd | undefined;
beforeAll(async () => {
  engine = await startDockerd();
}, 120_000);
afterAll(async () => {
  await engine?.stop();
}, 120_000);

describe('the gated image with compose', { timeout: 900_000 }, () => {
  it('builds offline, starts healthy as a non-root user, answers in the web chat through an agent container', async () => {
    const d = engine!;
    const started = Math.floor(Date.now() / 1000);
    const env = { ...process.env, DOCKER_HOST: d.host };
    await d.buildAgentImage('gated-agent:latest');
    const built = await run('bash', [packageFile('docker', 'build-gated-offline.sh'), 'gated:test'], {
      env,
      maxBuffer: 1 << 24,
    }).catch((err: Error & { stderr?: string }) => {
      throw new Error(`building gated:test failed: ${err.message}\n${err.stderr ?? ''}`);
    });
    expect(built.stdout.trim()).toBe('gated:test');
    const image = (await d.docker.getImage('gated:test').inspect()) as {
      Config: { User: string; Healthcheck?: { Test: string[] } };
    };
    expect(image.Config.User).toBe('1000:1000');
    expect(image.Config.Healthcheck?.Test.join(' ')).toContain('/healthz');

    // The data folder has the same path inside and outside (the engine mounts group folders by host path).
    const data = tempDir('gated-compose-');
    chownSync(data, 1000, 1000);
    const port = await freePort();
    const compose = await composeCommand();
    const project = `gatedtest${port}`;
    const composeEnv = {
      ...env,
      GATED_IMAGE: 'gated:test',
      GATED_DATA: data,
      DOCKER_SOCKET: d.socketPath,
      DOCKER_GID: String(statSync(d.socketPath).gid),
      GATED_HTTP_PORT: String(port),
    };
    const composeRun = (...args: string[]) =>
      run(
        compose[0]!,
        [...compose.slice(1), '-p', project, '-f', packageFile('docker', 'compose.yaml'), ...args],
        {
          env: composeEnv,
        },
      );
    await composeRun('up', '-d', '--no-build');
    try {
      const url = `http://127.0.0.1:${port}`;
      await until(
        async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200,
        60_000,
        'gated in its container answering /healthz',
      );
      const containers = await d.docker.listContainers({
        filters: { label: [`com.docker.compose.project=${project}`] },
      });
      expect(containers).toHaveLength(1);
      const box = d.docker.getContainer(containers[0]!.Id);
      const top = (await box.top({ ps_args: '-o pid,uid,args' })) as {
        Titles: string[];
        Processes: string[][];
      };
      const uid = top.Titles.indexOf('UID');
      expect(uid).toBeGreaterThanOrEqual(0);
      expect(top.Processes.map((p) => p[uid])).toEqual(['1000']);
      // Docker's own health check, the one the image declares, agrees.
      await until(
        async () =>
          ((await box.inspect()) as { State: { Health?: { Status: string } } }).State.Health?.Status ===
          'healthy',
        60_000,
        'the container reported healthy',
      );

      const sent = await fetch(`${url}/api/chat/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ group: 'demo', content: 'hello from compose' }),
      });
      expect(sent.status).toBe(201);
      const answer = await until(
        async () => {
          const h = (await (await fetch(`${url}/api/chat/history?group=demo`)).json()) as {
            lines: { role: string; content: string }[];
          };
          return h.lines.find((l) => l.role === 'agent')?.content;
        },
        60_000,
        "the agent's answer in the web chat",
      );
      expect(answer).toBe('echo: hello from compose');
      // The answer came from an agent container started on the same engine.
      const events = await d.docker.getEvents({
        since: started,
        until: Math.ceil(Date.now() / 1000),
        filters: { type: ['container'], event: ['start'], image: ['gated-agent:latest'] },
      });
      let text = '';
      for await (const chunk of events as AsyncIterable<Buffer>) text += String(chunk);
      expect(text.trim().split('\n').length).toBeGreaterThanOrEqual(1);
      expect(text).toContain('"gated-agent:latest"');
    } finally {
      await composeRun('down', '--timeout', '20');
    }
    expect(
      await d.docker.listContainers({
        all: true,
        filters: { label: [`com.docker.compose.project=${project}`] },
      }),
    ).toEqual([]);
  });
});
