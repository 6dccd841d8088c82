/**
 * The docker runtime on a remote engine over mutual TLS: a second dockerd serves tcp://127.0.0.1 with
 * certificates this test makes, and the shared runtime conformance suite runs through it with the client
 * certificate read from a DOCKER_CERT_PATH folder. A client certificate from another CA is refused with a
 * named error, and so is an image the engine does not hold.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { startGated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { createDockerRuntime, INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { engineOptions, EngineError, checkEngine } from '../../queue/runtime/engine.js';
import { makeTestCerts, type TestCerts } from '../infra/certs.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { runtimeConformance } from './runtime-conformance.js';

const IMAGE = 'gated-conformance:tls';
const INSTANCE = `tls-${process.pid}`;
let engine: TestDockerd | undefined;
let certs: TestCerts;
let port = 0;
let certDir = '';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const p = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return p;
}

const client = (certPath: string) =>
  new Docker(engineOptions({ host: `tcp://127.0.0.1:${port}`, tlsVerify: true, certPath }));

beforeAll(async () => {
  // Kept for the whole file (helpers' tempDir folders go after each test).
  certDir = mkdtempSync(join(tmpdir(), 'gated-certs-'));
  certs = await makeTestCerts(certDir);
  port = await freePort();
  engine = await startDockerd(60_000, {
    tls: { port, ca: certs.ca, cert: certs.serverCert, key: certs.serverKey },
  });
  await engine.buildAgentImage(IMAGE, packageFile('test', 'queue', 'agents'), 'conformance-agent.mjs');
});

afterAll(async () => {
  await engine?.stop();
  rmSync(certDir, { recursive: true, force: true });
});

runtimeConformance('docker over mutual TLS', () => ({
  runtime: (groupsDir) =>
    createDockerRuntime({
      docker: client(certs.clientDir),
      image: IMAGE,
      instanceId: INSTANCE,
      groupsDir,
      memoryBytes: 256 * 1024 * 1024,
      pidsLimit: 64,
    }),
  workdirSeenByAgent: () => '/workspace',
  hostPids: false,
  assertNothingLeft: async () =>
    expect(
      await engine!.docker.listContainers({
        all: true,
        filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] },
      }),
    ).toEqual([]),
}));

describe('a remote engine over mutual TLS', () => {
  it('speaks TLS only: the API answers the right client', async () => {
    const info = await client(certs.clientDir).version();
    expect(info.ApiVersion).toMatch(/^\d+\.\d+$/);
  });

  it('refuses a client certificate from another CA with a named error', async () => {
    const err = await checkEngine(client(certs.wrongClientDir), 'the test engine', [IMAGE]).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ problem: 'tls' });
    expect((err as Error).message).toMatch(/refused the TLS handshake.*DOCKER_CERT_PATH/);
  });

  it('names an image the engine does not hold, and a missing certificate file', async () => {
    await expect(
      checkEngine(client(certs.clientDir), 'the test engine', ['gated-nowhere:1']),
    ).rejects.toMatchObject({
      problem: 'image_missing',
      message: expect.stringMatching(/image gated-nowhere:1 is not on the engine/),
    });
    expect(() =>
      engineOptions({
        host: `tcp://127.0.0.1:${port}`,
        tlsVerify: true,
        certPath: join(certs.clientDir, 'nope'),
      }),
    ).toThrow(/cannot read .*ca\.pem/);
    expect(() => engineOptions({ host: 'ssh://x', tlsVerify: false, certPath: undefined })).toThrow(
      EngineError,
    );
  });

  it('is checked when gated starts: a refused certificate or a missing image stops the start with one line', async () => {
    const dir = tempDir('gated-remote-start-');
    const env = {
      GATED_DB: join(dir, 'gated.db'),
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_HTTP_PORT: '0',
      GATED_RUNTIME: 'docker',
      DOCKER_HOST: `tcp://127.0.0.1:${port}`,
      DOCKER_TLS_VERIFY: '1',
    };
    const start = (over: Record<string, string>) =>
      startGated({ config: loadConfig({ ...env, ...over }), log: silentLogger(), channels: [] });
    await expect(start({ DOCKER_CERT_PATH: certs.wrongClientDir, GATED_AGENT_IMAGE: IMAGE })).rejects.toThrow(
      /refused the TLS handshake/,
    );
    await expect(
      start({ DOCKER_CERT_PATH: certs.clientDir, GATED_AGENT_IMAGE: 'gated-nowhere:1' }),
    ).rejects.toThrow(
      /image gated-nowhere:1 is not on the engine at tcp:\/\/127\.0\.0\.1:\d+ \(mutual TLS\)/,
    );
    const ok = await start({ DOCKER_CERT_PATH: certs.clientDir, GATED_AGENT_IMAGE: IMAGE });
    await ok.close(1000);
  });
});
