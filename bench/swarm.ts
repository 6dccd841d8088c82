import { createServer, type AddressInfo } from 'node:net';
import { startDockerd, type TestDockerd } from '../test/infra/dockerd.js';
import { gatedCycles } from './docker.js';
import { benchInstance, pct } from './pipeline.js';

/**
 * Scale-out: the swarm runtime against the docker runtime on the same engine (a single-node swarm on this
 * machine), and how many agents one node holds at once. Message → reply and message → run ended, one run
 * after another through a real gated; then `concurrent` swarm runs kept alive together, with the memory
 * each task's container uses, from the engine's own stats.
 */

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

async function swarmEngine(): Promise<TestDockerd> {
  const dockerd = await startDockerd(60_000, { env: { DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: '1' } });
  const port = await freePort();
  await dockerd.docker.swarmInit({
    ListenAddr: `127.0.0.1:${port}`,
    AdvertiseAddr: `127.0.0.1:${port}`,
    DataPathAddr: '127.0.0.1',
  });
  for (const name of ['ingress', 'docker_gwbridge'])
    await dockerd.docker
      .getNetwork(name)
      .remove()
      .catch(() => undefined);
  return dockerd;
}

const median = (xs: number[]) =>
  pct(
    [...xs].sort((a, b) => a - b),
    50,
  );

/** Medians of `gatedCycles` on `kind`. */
async function cycles(kind: 'docker' | 'swarm', host: string, image: string, runs: number) {
  const r = await gatedCycles(kind, host, image, runs);
  return { replyMs: median(r.reply), cycleMs: median(r.cycle) };
}

/** Keeps `n` swarm runs alive at once (an idle timeout long enough), then reads their memory use. */
async function holdConcurrent(dockerd: TestDockerd, image: string, n: number) {
  const inst = await benchInstance({
    groups: n,
    maxConcurrent: n,
    idleMs: 120_000,
    runtime: { kind: 'swarm', host: dockerd.host, image },
  });
  try {
    const t0 = performance.now();
    for (let g = 0; g < n; g++)
      inst.channel.sink!({ chat_jid: `bench:g${g}`, sender: 'bench', content: `tok-${g}` });
    await inst.channel.waitFor(n, 300_000);
    const allAnsweredMs = performance.now() - t0;
    const containers = await dockerd.docker.listContainers({ filters: { label: ['gated.run'] } });
    const usage: number[] = [];
    for (const c of containers) {
      const stats = (await dockerd.docker.getContainer(c.Id).stats({ stream: false })) as {
        memory_stats?: { usage?: number; stats?: { cache?: number; inactive_file?: number } };
      };
      const m = stats.memory_stats;
      if (m?.usage) usage.push(m.usage - (m.stats?.inactive_file ?? m.stats?.cache ?? 0));
    }
    return { alive: containers.length, allAnsweredMs, memPerRunMiB: median(usage) / 2 ** 20 };
  } finally {
    await inst.close();
  }
}

/** The swarm scenario: ratio swarm / docker per run, and concurrent runs on one node. */
export async function swarmScale(runs: number, concurrent: number) {
  const dockerd = await swarmEngine();
  try {
    const image = await dockerd.buildAgentImage('gated-bench-agent:latest');
    const docker = await cycles('docker', dockerd.host, image, runs);
    const swarm = await cycles('swarm', dockerd.host, image, runs);
    const held = await holdConcurrent(dockerd, image, concurrent);
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      scenario: 'swarm',
      runs,
      dockerReplyMedianMs: Math.round(docker.replyMs),
      swarmReplyMedianMs: Math.round(swarm.replyMs),
      replyRatio: round(swarm.replyMs / docker.replyMs),
      dockerCycleMedianMs: Math.round(docker.cycleMs),
      swarmCycleMedianMs: Math.round(swarm.cycleMs),
      cycleRatio: round(swarm.cycleMs / docker.cycleMs),
      concurrentAsked: concurrent,
      concurrentAlive: held.alive,
      concurrentAllAnsweredMs: Math.round(held.allAnsweredMs),
      memPerRunMiB: round(held.memPerRunMiB),
    };
  } finally {
    await dockerd.docker.swarmLeave({ force: true }).catch(() => undefined);
    await dockerd.stop();
  }
}
