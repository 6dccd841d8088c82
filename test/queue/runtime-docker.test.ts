import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { packageFile } from '../../core/paths.js';
import { createQueue } from '../../queue/queue.js';
import {
  createDockerRuntime,
  INSTANCE_LABEL,
  type DockerRuntimeOptions,
} from '../../queue/runtime/docker.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { ready } from './helpers.js';
import { runtimeConformance } from './runtime-conformance.js';
import { recordingSignals } from '../helpers/signals.js';
import { groupDirOf } from '../../core/group-dir.js';

const CONFORMANCE_IMAGE = 'gated-conformance:test';
const EXAMPLE_IMAGE = 'gated-agent:test';
const INSTANCE = `test-${process.pid}`;

let engine: TestDockerd | undefined;

beforeAll(async () => {
  // No skip: a machine without a working engine fails here, with dockerd's own words.
  engine = await startDockerd();
  await engine.buildAgentImage(
    CONFORMANCE_IMAGE,
    packageFile('test', 'queue', 'agents'),
    'conformance-agent.mjs',
  );
  await engine.buildAgentImage(EXAMPLE_IMAGE);
});

afterAll(async () => {
  await engine?.stop();
});

function dockerRuntime(groupsDir: string, over: Partial<DockerRuntimeOptions> = {}) {
  return createDockerRuntime({
    docker: engine!.docker,
    image: CONFORMANCE_IMAGE,
    instanceId: INSTANCE,
    groupsDir,
    memoryBytes: 256 * 1024 * 1024,
    pidsLimit: 64,
    nanoCpus: 500_000_000,
    ...over,
  });
}

async function ours(instance = INSTANCE) {
  return engine!.docker.listContainers({ all: true, filters: { label: [`${INSTANCE_LABEL}=${instance}`] } });
}

runtimeConformance('docker', () => ({
  runtime: (groupsDir) => dockerRuntime(groupsDir),
  workdirSeenByAgent: () => '/workspace',
  hostPids: false,
  assertNothingLeft: async () => expect(await ours()).toEqual([]),
}));

describe('docker runtime on a real engine', () => {
  it('runs the agent locked down: no caps, no new privileges, read-only root, no network, limits, only allowed mounts', async () => {
    const groups = tempDir('gated-docker-groups-');
    const allowed = tempDir('gated-docker-allow-');
    writeFileSync(join(allowed, 'notes.txt'), 'shared\n');
    const rt = dockerRuntime(groups, { mountAllow: [allowed] });
    const handle = await rt.start({
      runId: 41,
      group: 'team/alpha',
      topic: 'ops',
      groupDir: groupDirOf(groups, 'team/alpha'),
      mounts: [{ path: allowed }],
    });
    try {
      const [info] = await engine!.docker.listContainers({ filters: { label: ['gated.run=41'] } });
      const c = await engine!.docker.getContainer(info!.Id).inspect();
      const hc = c.HostConfig;
      expect(hc.CapDrop).toEqual(['ALL']);
      expect(hc.CapAdd ?? []).toEqual([]);
      expect(hc.SecurityOpt).toContain('no-new-privileges');
      expect(hc.Privileged).toBe(false);
      expect(hc.ReadonlyRootfs).toBe(true);
      expect(Object.keys(hc.Tmpfs ?? {})).toEqual(['/tmp']);
      expect(hc.NetworkMode).toBe('none');
      expect(hc.Memory).toBe(256 * 1024 * 1024);
      expect(hc.PidsLimit).toBe(64);
      expect(hc.NanoCpus).toBe(500_000_000);
      expect(c.Config.User).toBe('1000:1000');
      expect(c.Config.WorkingDir).toBe('/workspace');
      expect(c.Config.Env.filter((e) => !/^(PATH|HOME|LANG|HOSTNAME)=/.test(e))).toEqual([]);
      expect(c.Config.Labels).toMatchObject({ [INSTANCE_LABEL]: INSTANCE, 'gated.group': 'team/alpha' });
      const mounts = c.Mounts.map((m) => ({ source: m.Source, target: m.Destination, rw: m.RW }));
      expect(mounts.sort((a, b) => a.target.localeCompare(b.target))).toEqual([
        { source: allowed, target: `/mnt/${allowed.split('/').pop()}`, rw: false },
        { source: groupDirOf(groups, 'team/alpha'), target: '/workspace', rw: true },
      ]);
    } finally {
      handle.kill();
      await handle.exited;
    }
    expect(await ours()).toEqual([]);
  });

  it('gives the network only to groups that allow it', async () => {
    const groups = tempDir('gated-docker-groups-');
    const rt = dockerRuntime(groups);
    const handle = await rt.start({
      runId: 42,
      group: 'net',
      topic: '',
      groupDir: join(groups, 'net'),
      network: 'host',
    });
    try {
      const [info] = await engine!.docker.listContainers({ filters: { label: ['gated.run=42'] } });
      expect(info!.HostConfig.NetworkMode).toBe('host');
    } finally {
      handle.kill();
      await handle.exited;
    }
  });

  it('honours DOCKER_HOST when no client is given', async () => {
    const groups = tempDir('gated-docker-groups-');
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = engine!.host;
    try {
      const rt = createDockerRuntime({ image: CONFORMANCE_IMAGE, instanceId: INSTANCE, groupsDir: groups });
      await rt.ping();
      const handle = await rt.start({ runId: 45, group: 'g', topic: '', groupDir: join(groups, 'g') });
      let out = '';
      handle.stdout.on('data', (c: Buffer) => (out += c.toString()));
      handle.write(
        JSON.stringify({ sessionId: null, messages: [{ content: 'echo via DOCKER_HOST' }] }) + '\n',
      );
      handle.closeStdin();
      expect((await handle.exited).code).toBe(0);
      expect(out).toContain('"result":"echo: via DOCKER_HOST"');
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });

  it('refuses a mount outside the allow-list and leaves no container', async () => {
    const groups = tempDir('gated-docker-groups-');
    const rt = dockerRuntime(groups, { mountAllow: [tempDir('gated-docker-allow-')] });
    await expect(
      rt.start({ runId: 43, group: 'g', topic: '', groupDir: join(groups, 'g'), mounts: [{ path: '/etc' }] }),
    ).rejects.toThrow(/not inside an allowed root/);
    expect(await ours()).toEqual([]);
  });

  it("removes this instance's leftover containers at the first start, and nobody else's", async () => {
    const groups = tempDir('gated-docker-groups-');
    const leftover = await engine!.docker.createContainer({
      Image: CONFORMANCE_IMAGE,
      Labels: { [INSTANCE_LABEL]: 'crashed-instance' },
      HostConfig: { NetworkMode: 'none' },
    });
    const foreign = await engine!.docker.createContainer({
      Image: CONFORMANCE_IMAGE,
      Labels: { [INSTANCE_LABEL]: 'someone-else' },
      HostConfig: { NetworkMode: 'none' },
    });
    try {
      const rt = dockerRuntime(groups, { instanceId: 'crashed-instance' });
      const handle = await rt.start({ runId: 44, group: 'g', topic: '', groupDir: join(groups, 'g') });
      const left = (await ours('crashed-instance')).map((c) => c.Id);
      expect(left).not.toContain(leftover.id);
      expect(left).toHaveLength(1);
      expect((await ours('someone-else')).map((c) => c.Id)).toEqual([foreign.id]);
      handle.closeStdin();
      expect((await handle.exited).code).toBe(0);
    } finally {
      await foreign.remove({ force: true });
    }
  });

  it('answers a chat end to end with the example agent image through the queue', async () => {
    const { db } = freshDb();
    const groups = tempDir('gated-docker-groups-');
    mkdirSync(join(groups, 'demo'));
    const { signals, outbound } = recordingSignals();
    const queue = createQueue({
      db,
      runtime: dockerRuntime(groups, { image: EXAMPLE_IMAGE }),
      config: {
        groupsDir: groups,
        maxConcurrent: 2,
        idleTimeoutMs: 200,
        runTimeoutMs: 30_000,
        maxOutputBytes: 1 << 20,
      },
      log: silentLogger(),
      signals,
    });
    try {
      const t0 = Date.now();
      ready(db, { group: 'demo', chat: 'web:demo', content: 'hello container' });
      queue.wake();
      await vi.waitFor(() => expect(outbound).toHaveLength(1), { timeout: 20_000, interval: 10 });
      const replyMs = Date.now() - t0;
      const reply = db.prepare('SELECT content FROM messages WHERE id = ?').pluck().get(outbound[0]);
      expect(reply).toBe('echo: hello container');
      await vi.waitFor(() => expect(queue.facts({ group: 'demo', topic: '' }).running).toBe(false), {
        timeout: 20_000,
      });
      expect(db.prepare('SELECT result FROM session_log').pluck().get()).toBe('ok');
      console.info(`docker: message → reply row ${replyMs} ms (create, attach, start, first block)`);
    } finally {
      await queue.close(5000);
    }
    expect(await ours()).toEqual([]);
  });
});
