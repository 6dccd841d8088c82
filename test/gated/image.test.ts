/**
 * gated's own image, built offline (docker/build-gated-offline.sh: the layout of docker/gated.Dockerfile on
 * an imported base), run with docker/compose.yaml on a test Docker engine that also runs its agents, and
 * talked to through the web chat. The engine has no bridge (docs/TESTING.md), which is why the compose file
 * uses host networking. Slow by nature: compiling gated and importing its dependencies as an image take
 * most of the time.
 */
import { execFile } from 'node:child_process';
import { chownSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
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

/** The files of gated's source folders the compiler does not compile (they run beside dist/ as they are). */
function runtimeFiles(): string[] {
  const folders = ['core', 'router', 'store', 'gateway', 'queue', 'channels', 'delivery', 'http', 'gated'];
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (!e.name.endsWith('.ts')) found.push(relative(packageFile(), path));
    }
  };
  for (const f of folders) walk(packageFile(f));
  return found.sort();
}

/**
 * What the classic builder (Debian's docker.io has no BuildKit) sends as the context of a build from `dir`,
 * in bytes, read from its "Sending build context" line. The build itself fails at once on a base image that
 * does not exist: the context is sent before that.
 */
async function classicContextBytes(host: string, args: string[]): Promise<number> {
  const out = await run('docker', ['build', '--build-arg', 'BASE=gated-no-such-base:none', ...args], {
    env: { ...process.env, DOCKER_HOST: host, DOCKER_BUILDKIT: '0' },
    cwd: packageFile(),
    maxBuffer: 1 << 24,
  }).then(
    (r) => r.stdout + r.stderr,
    (err: Error & { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
  );
  const m = /Sending build context to Docker daemon\s+([\d.]+)([kMG]?B)/.exec(out);
  if (!m) throw new Error(`no "Sending build context" line from the classic builder:\n${out}`);
  const unit = { B: 1, kB: 1e3, MB: 1e6, GB: 1e9 }[m[2]!]!;
  return Number(m[1]) * unit;
}

let engine: TestDockerd | undefined;
beforeAll(async () => {
  engine = await startDockerd();
}, 120_000);
afterAll(async () => {
  await engine?.stop();
}, 120_000);

describe('what the images are built from', () => {
  it('the Dockerfile copies every file that runs beside dist/', () => {
    const dockerfile = readFileSync(packageFile('docker', 'gated.Dockerfile'), 'utf8');
    const files = runtimeFiles();
    expect(files).toContain('store/checkpoint-worker.mjs');
    for (const f of files)
      expect(dockerfile, `docker/gated.Dockerfile copies ${f}`).toMatch(new RegExp(`COPY ${f} `));
  });

  it('a build context of the size of the sources with the classic builder', async () => {
    // node_modules, dist/, data/ and .env are kept out by the root .dockerignore alone, the one file a
    // builder without BuildKit reads (the per-Dockerfile ones are BuildKit's).
    const bound = 20e6;
    const gated = await classicContextBytes(engine!.host, ['-f', 'docker/gated.Dockerfile', '.']);
    const agent = await classicContextBytes(engine!.host, ['-f', 'docker/Dockerfile', '.']);
    const claude = await classicContextBytes(engine!.host, ['agents/claude']);
    expect(gated).toBeLessThan(bound);
    expect(agent).toBeLessThan(bound);
    expect(claude).toBeLessThan(bound);
  }, 120_000);
});

describe('the gated image with compose', { timeout: 900_000 }, () => {
  it('builds offline, starts healthy as a non-root user, answers in the web chat through an agent container', async () => {
    const d = engine!;
    const started = Math.floor(Date.now() / 1000);
    const env = { ...process.env, DOCKER_HOST: d.host };
    // The two images at once (each imports a base of its own), gated's from the dist/ the run built
    // (test/global-setup.ts) rather than a second compile.
    const [, built] = await Promise.all([
      d.buildAgentImage('gated-agent:latest'),
      run('bash', [packageFile('docker', 'build-gated-offline.sh'), 'gated:test'], {
        env: { ...env, GATED_DIST: packageFile('dist') },
        maxBuffer: 1 << 24,
      }).catch((err: Error & { stderr?: string }) => {
        throw new Error(`building gated:test failed: ${err.message}\n${err.stderr ?? ''}`);
      }),
    ]);
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
      // Every file that runs beside dist/ is in the image, and the WAL checkpoints run in their worker
      // thread: it never fell back to the event loop.
      for (const f of runtimeFiles()) {
        const probe = await run(
          'docker',
          ['exec', containers[0]!.Id, 'node', '-e', `require('fs').accessSync('/app/${f}')`],
          { env },
        ).then(
          () => 'present',
          (err: Error) => err.message,
        );
        expect(probe, f).toBe('present');
      }
      const logs = String(await box.logs({ stdout: true, stderr: true }));
      expect(logs).not.toContain('the checkpoint worker stopped');
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
