/**
 * The swarm runtime on a real single-node swarm: the test starts its own dockerd, initialises a swarm on
 * loopback, and runs the shared runtime conformance suite with every run a one-shot service. Services and
 * containers of the suite must all be gone afterwards.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import Docker from 'dockerode';
import { nodeEngines } from '../../queue/runtime/engine.js';
import { makeTestCerts, type TestCerts } from '../infra/certs.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { createSwarmRuntime } from '../../queue/runtime/swarm.js';
import { ContainerEvents } from '../../queue/runtime/swarm-task.js';
import { join } from 'node:path';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { runtimeConformance } from './runtime-conformance.js';
import { groupDirOf } from '../../core/group-dir.js';

const IMAGE = 'gated-conformance:swarm';
const INSTANCE = `swarm-${process.pid}`;
let engine: TestDockerd | undefined;
let certs: TestCerts;
let certDir = '';
let tlsPort = 0;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const p = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return p;
}

/**
 * The host interface `docker_gwbridge` a swarm init creates before the test can remove its network: the
 * engine leaves the link behind when it stops, so the test deletes it unless it was there before.
 */
const GWBRIDGE = '/sys/class/net/docker_gwbridge';
const gwbridgeBefore = existsSync(GWBRIDGE);

beforeAll(async () => {
  // Without this, every task start asks a registry for the tag first; there is none here.
  certDir = mkdtempSync(join(tmpdir(), 'gated-swarm-certs-'));
  certs = await makeTestCerts(certDir);
  tlsPort = await freePort();
  engine = await startDockerd(60_000, {
    env: { DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: '1' },
    // The node's engine also on TLS, as a worker of a multi-node swarm would be reached.
    tls: { port: tlsPort, ca: certs.ca, cert: certs.serverCert, key: certs.serverKey },
  });
  const port = await freePort();
  await engine.docker.swarmInit({
    ListenAddr: `127.0.0.1:${port}`,
    AdvertiseAddr: `127.0.0.1:${port}`,
    DataPathAddr: '127.0.0.1',
  });
  // Keep everything on loopback: no ingress overlay, no gateway bridge.
  for (const name of ['ingress', 'docker_gwbridge']) {
    await engine.docker
      .getNetwork(name)
      .remove()
      .catch(() => undefined);
  }
  await engine.buildAgentImage(IMAGE, packageFile('test', 'queue', 'agents'), 'conformance-agent.mjs');
}, 180_000);

afterAll(async () => {
  await engine?.docker.swarmLeave({ force: true }).catch(() => undefined);
  await engine?.stop();
  rmSync(certDir, { recursive: true, force: true });
  if (!gwbridgeBefore && existsSync(GWBRIDGE)) execFileSync('ip', ['link', 'delete', 'docker_gwbridge']);
  expect(gwbridgeBefore || !existsSync(GWBRIDGE)).toBe(true);
});

const ours = async () => ({
  services: await engine!.docker.listServices({ filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] } }),
  containers: await engine!.docker.listContainers({
    all: true,
    filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] },
  }),
});

const swarm = (groupsDir: string) =>
  createSwarmRuntime({
    docker: engine!.docker,
    image: IMAGE,
    instanceId: INSTANCE,
    groupsDir,
    memoryBytes: 256 * 1024 * 1024,
    pidsLimit: 64,
    where: 'the test swarm',
  });

runtimeConformance('swarm', () => ({
  runtime: swarm,
  workdirSeenByAgent: () => '/workspace',
  hostPids: false,
  assertNothingLeft: async () => {
    // A removed service's container goes about a second later.
    let left = await ours();
    await until(
      async () => {
        left = await ours();
        return left.services.length === 0 && left.containers.length === 0;
      },
      15_000,
      'the services and containers of ended runs removed',
    ).catch(() => undefined);
    expect(left).toEqual({ services: [], containers: [] });
  },
}));

describe('swarm runtime on a real swarm', () => {
  it('runs each run as a locked-down one-shot service labelled with instance, group and run', async () => {
    const groups = tempDir('gated-swarm-groups-');
    const rt = swarm(groups);
    await rt.ping();
    const handle = await rt.start({
      runId: 77,
      group: 'team/alpha',
      topic: 'ops',
      groupDir: groupDirOf(groups, 'team/alpha'),
    });
    try {
      const [svc] = await engine!.docker.listServices({ filters: { label: ['gated.run=77'] } });
      const spec = svc!.Spec!;
      expect(spec.Labels).toMatchObject({
        [INSTANCE_LABEL]: INSTANCE,
        'gated.group': 'team/alpha',
        'gated.topic': 'ops',
      });
      expect(spec.TaskTemplate?.RestartPolicy?.Condition).toBe('none');
      const [info] = await engine!.docker.listContainers({ filters: { label: ['gated.run=77'] } });
      const c = await engine!.docker.getContainer(info!.Id).inspect();
      expect(c.HostConfig.CapDrop).toEqual(['ALL']);
      expect(c.HostConfig.ReadonlyRootfs).toBe(true);
      expect(c.HostConfig.Memory).toBe(256 * 1024 * 1024);
      expect(c.HostConfig.PidsLimit).toBe(64);
      expect(c.Config.User).toBe('1000:1000');
      expect(c.Config.Env.filter((e) => !/^(PATH|HOME|LANG|HOSTNAME)=/.test(e))).toEqual([]);
      expect(rt.startLatencies.length).toBe(1);
    } finally {
      handle.kill();
      await handle.exited;
    }
  });

  it("puts a group's task on the network it names (registered_groups.network)", async () => {
    const groups = tempDir('gated-swarm-net-');
    const rt = swarm(groups);
    // `host` is the network this loopback-only swarm has; an overlay is named the same way.
    const handle = await rt.start({
      runId: 78,
      group: 'net',
      topic: '',
      groupDir: join(groups, 'net'),
      network: 'host',
    });
    try {
      const [svc] = await engine!.docker.listServices({ filters: { label: ['gated.run=78'] } });
      // The swarm keeps the network by its swarm-wide id.
      expect(svc!.Spec!.TaskTemplate?.Networks).toHaveLength(1);
      const [info] = await engine!.docker.listContainers({ filters: { label: ['gated.run=78'] } });
      const c = await engine!.docker.getContainer(info!.Id).inspect();
      expect(c.HostConfig.NetworkMode).toBe('host');
    } finally {
      handle.kill();
      await handle.exited;
    }
  });

  it("sweeps services of dead runs and leaves a live run's service alone", async () => {
    const groups = tempDir('gated-swarm-sweep-');
    const started: string[] = [];
    const rt = createSwarmRuntime({
      docker: engine!.docker,
      image: IMAGE,
      instanceId: INSTANCE,
      groupsDir: groups,
      sweepEveryMs: 0,
      metrics: { agentStarted: (_runtime, node) => started.push(node) },
    });
    // A service left by a run of an earlier gated process (same instance id), never attached to.
    await engine!.docker.createService({
      Name: `dead-run-${process.pid}`,
      Labels: { [INSTANCE_LABEL]: INSTANCE, 'gated.run': '9000' },
      TaskTemplate: { ContainerSpec: { Image: IMAGE }, RestartPolicy: { Condition: 'none' } },
      Mode: { Replicated: { Replicas: 0 } },
    } as never);
    const handle = await rt.start({ runId: 78, group: 'g', topic: '', groupDir: join(groups, 'g') });
    try {
      // The first start swept the dead run's service; a sweep now finds nothing else to remove.
      expect(await rt.sweep()).toBe(0);
      const left = await engine!.docker.listServices({
        filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] },
      });
      expect(left.map((x) => x.Spec?.Labels?.['gated.run'])).toEqual(['78']);
      expect(started).toHaveLength(1);
      expect(started[0]).toMatch(/^\w+$/);
    } finally {
      handle.kill();
      await handle.exited;
      await rt.close?.();
    }
  });

  it("attaches to a task on its node's engine over mutual TLS (GATED_SWARM_NODE_PORT)", async () => {
    const groups = tempDir('gated-swarm-nodes-');
    const address = { host: engine!.host, tlsVerify: true, certPath: certs.clientDir };
    const nodeEngine = nodeEngines(engine!.docker, Docker, address, tlsPort)!;
    const seen: string[] = [];
    const rt = createSwarmRuntime({
      docker: engine!.docker,
      image: IMAGE,
      instanceId: INSTANCE,
      groupsDir: groups,
      sweepEveryMs: 0,
      nodeEngine: async (id) => {
        seen.push(id);
        return nodeEngine(id);
      },
    });
    const handle = await rt.start({ runId: 79, group: 'g', topic: '', groupDir: join(groups, 'g') });
    let out = '';
    handle.stdout.on('data', (c: Buffer) => (out += c.toString()));
    handle.write(JSON.stringify({ sessionId: null, messages: [{ id: 1, content: 'echo over tls' }] }) + '\n');
    handle.closeStdin();
    const exit = await handle.exited;
    expect(exit.code).toBe(0);
    expect(out).toContain('echo: over tls');
    expect(seen).toHaveLength(1);
    // The client it made speaks TLS to the node's address (127.0.0.1 here), not the manager's socket.
    const client = await nodeEngine(seen[0]!);
    expect((client.modem as unknown as { protocol: string; host: string }).protocol).toBe('https');
    await rt.close?.();
  });

  it("learns a task's start from its engine's events: the run's container and its node", async () => {
    const groups = tempDir('gated-swarm-events-');
    const rt = swarm(groups);
    const labels = { [INSTANCE_LABEL]: INSTANCE, 'gated.run': '80' };
    const events = await ContainerEvents.open(engine!.docker, labels);
    // A container of another run on the same engine is not this run's start.
    const other = await engine!.docker.createContainer({
      Image: IMAGE,
      Labels: { [INSTANCE_LABEL]: INSTANCE, 'gated.run': '81' },
      Entrypoint: ['/usr/local/bin/node', '-e', ''],
      HostConfig: { NetworkMode: 'none' },
    });
    await other.start();
    await other.wait();
    await other.remove();
    expect(events.started).toBeUndefined();
    const handle = await rt.start({ runId: 80, group: 'g', topic: '', groupDir: join(groups, 'g') });
    try {
      await until(() => events.started !== undefined, 10_000, 'the start event of run 80');
      const [info] = await engine!.docker.listContainers({ filters: { label: ['gated.run=80'] } });
      const swarmInfo = (await engine!.docker.info()) as { Swarm: { NodeID: string } };
      expect(events.started).toEqual({ containerId: info!.Id, nodeId: swarmInfo.Swarm.NodeID });
    } finally {
      events.close();
      handle.kill();
      await handle.exited;
    }
  });

  it('says when the engine is not a swarm manager', async () => {
    const plain = await startDockerd();
    try {
      await plain.buildAgentImage(IMAGE, packageFile('test', 'queue', 'agents'), 'conformance-agent.mjs');
      const rt = createSwarmRuntime({
        docker: plain.docker,
        image: IMAGE,
        instanceId: INSTANCE,
        groupsDir: tempDir(),
      });
      await expect(rt.ping()).rejects.toMatchObject({ problem: 'not_swarm' });
    } finally {
      await plain.stop();
    }
  }, 120_000);
});

describe('swarm runtime: services made ahead of a lane’s next run (spares)', () => {
  const spareServices = () =>
    engine!.docker.listServices({ filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`, 'gated.spare'] } });
  const containerOf = async (label: string) => {
    const [info] = await engine!.docker.listContainers({ filters: { label: [label] } });
    return info?.Id;
  };
  const withSpares = (groupsDir: string) =>
    createSwarmRuntime({
      docker: engine!.docker,
      image: IMAGE,
      instanceId: INSTANCE,
      groupsDir,
      sweepEveryMs: 0,
      spares: 4,
    });
  /** Runs one turn on `handle` and returns its output once the agent exited. */
  const turn = async (handle: Awaited<ReturnType<ReturnType<typeof withSpares>['start']>>, text: string) => {
    let out = '';
    handle.stdout.on('data', (c: Buffer) => (out += c.toString()));
    handle.write(JSON.stringify({ sessionId: null, messages: [{ id: 1, content: text }] }) + '\n');
    handle.closeStdin();
    const exit = await handle.exited;
    return { out, code: exit.code };
  };

  it("serves the lane's next run on the spare its run made, then makes the next one; close removes it", async () => {
    const groups = tempDir('gated-swarm-spare-');
    const rt = withSpares(groups);
    try {
      const first = await rt.start({ runId: 90, group: 'g', topic: 't', groupDir: join(groups, 'g') });
      expect(await turn(first, 'echo one')).toMatchObject({
        code: 0,
        out: expect.stringContaining('echo: one'),
      });
      let spare = '';
      await until(
        async () => {
          const [s] = await spareServices();
          spare = s?.Spec?.Labels?.['gated.spare'] ?? '';
          return spare !== '' && (await containerOf(`gated.spare=${spare}`)) !== undefined;
        },
        30_000,
        'the spare of lane g/t running',
      );
      const [svc] = await spareServices();
      expect(svc!.Spec!.Labels).toMatchObject({ 'gated.group': 'g', 'gated.topic': 't' });
      expect(svc!.Spec!.Labels!['gated.run']).toBeUndefined();
      const spareContainer = await containerOf(`gated.spare=${spare}`);
      const c = await engine!.docker.getContainer(spareContainer!).inspect();
      expect(c.HostConfig.CapDrop).toEqual(['ALL']);
      expect(c.HostConfig.ReadonlyRootfs).toBe(true);

      const second = await rt.start({ runId: 91, group: 'g', topic: 't', groupDir: join(groups, 'g') });
      // The run took the spare's container: no service of its own was made.
      expect(await engine!.docker.listServices({ filters: { label: ['gated.run=91'] } })).toEqual([]);
      // While it runs, the lane has no other container: its next spare is made when it ends.
      expect((await spareServices()).map((x) => x.Spec?.Labels?.['gated.spare'])).toEqual([spare]);
      expect(await turn(second, 'echo two')).toMatchObject({
        code: 0,
        out: expect.stringContaining('echo: two'),
      });
      // At its end, the next run of the lane gets a spare of its own.
      await until(
        async () => (await spareServices()).some((x) => x.Spec?.Labels?.['gated.spare'] !== spare),
        30_000,
        'the next spare of lane g/t',
      );
      // Its service went with its end, as a run's own does.
      await until(
        async () => (await containerOf(`gated.spare=${spare}`)) === undefined,
        15_000,
        'spare gone',
      );
    } finally {
      await rt.close?.();
    }
    expect(await spareServices()).toEqual([]);
  });

  it('does not use a spare made for another spec: the run gets its own service and the spare is removed', async () => {
    const groups = tempDir('gated-swarm-spare-spec-');
    const rt = withSpares(groups);
    try {
      const first = await rt.start({ runId: 92, group: 'h', topic: '', groupDir: join(groups, 'h') });
      await turn(first, 'echo one');
      await until(async () => (await spareServices()).length === 1, 30_000, 'a spare for lane h');
      const [old] = await spareServices();
      // The group now names a network: its spare, made without one, is not the service this run needs.
      const second = await rt.start({
        runId: 93,
        group: 'h',
        topic: '',
        groupDir: join(groups, 'h'),
        network: 'host',
      });
      try {
        const [own] = await engine!.docker.listServices({ filters: { label: ['gated.run=93'] } });
        expect(own!.Spec!.TaskTemplate?.Networks).toHaveLength(1);
        await until(
          async () => !(await spareServices()).some((x) => x.ID === old!.ID),
          15_000,
          'the spare of the old spec removed',
        );
      } finally {
        second.kill();
        await second.exited;
      }
    } finally {
      await rt.close?.();
    }
    expect(await spareServices()).toEqual([]);
  });

  it('does not use a spare whose agent is gone, and removes a spare nobody took in time', async () => {
    const groups = tempDir('gated-swarm-spare-dead-');
    const rt = createSwarmRuntime({
      docker: engine!.docker,
      image: IMAGE,
      instanceId: INSTANCE,
      groupsDir: groups,
      sweepEveryMs: 0,
      spares: 4,
      spareIdleMs: 3000,
    });
    try {
      await turn(
        await rt.start({ runId: 95, group: 'm', topic: '', groupDir: join(groups, 'm') }),
        'echo one',
      );
      let tag = '';
      await until(
        async () => {
          tag = (await spareServices())[0]?.Spec?.Labels?.['gated.spare'] ?? '';
          return tag !== '' && (await containerOf(`gated.spare=${tag}`)) !== undefined;
        },
        30_000,
        'the spare of lane m running',
      );
      await engine!.docker.getContainer((await containerOf(`gated.spare=${tag}`))!).kill();
      const second = await rt.start({ runId: 96, group: 'm', topic: '', groupDir: join(groups, 'm') });
      // Its own service, not the dead spare's; the dead spare's service is gone.
      expect(await engine!.docker.listServices({ filters: { label: ['gated.run=96'] } })).toHaveLength(1);
      expect(await turn(second, 'echo two')).toMatchObject({
        code: 0,
        out: expect.stringContaining('echo: two'),
      });
      expect((await spareServices()).map((x) => x.Spec?.Labels?.['gated.spare'])).not.toContain(tag);
      // The spare run 96 made is removed once it waited 3 s for a run that never came.
      await until(async () => (await spareServices()).length === 1, 30_000, 'the spare of run 96');
      await until(async () => (await spareServices()).length === 0, 15_000, 'the unused spare removed');
    } finally {
      await rt.close?.();
    }
  });

  it("leaves no spare behind a process that died: the next process's sweep removes it", async () => {
    const groups = tempDir('gated-swarm-spare-crash-');
    const dead = withSpares(groups);
    const run = await dead.start({ runId: 94, group: 'k', topic: '', groupDir: join(groups, 'k') });
    await turn(run, 'echo one');
    await until(async () => (await spareServices()).length === 1, 30_000, 'a spare for lane k');
    // `dead` is never closed, as after a crash; a new runtime of the same instance serves nothing yet.
    const next = withSpares(groups);
    expect(await next.sweep()).toBe(1);
    expect(await spareServices()).toEqual([]);
    await next.close?.();
    await dead.close?.();
  });
});
