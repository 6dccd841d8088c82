import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import type Docker from 'dockerode';
import { startDockerd, type TestDockerd } from '../test/infra/dockerd.js';
import { gatedCycles } from './docker.js';
import { benchInstance, pct } from './pipeline.js';

/**
 * Scale-out: the swarm runtime against the docker runtime on the same engine (a single-node swarm on this
 * machine), and how many agents one node holds at once. Message → reply and message → run ended, one run
 * after another through a real gated, in rounds that take the two runtimes in turn, with each run's phases
 * (service and container events from the engine) placed on the same clock; then `concurrent` swarm runs
 * kept alive together, with the memory each task's container uses, from the engine's own stats.
 */

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * The host link docker_gwbridge that a swarm init creates: the engine leaves it behind when it stops, so it
 * is deleted after the bench unless it was there before.
 */
const GWBRIDGE = '/sys/class/net/docker_gwbridge';

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

/** One engine event of a run: `container.start`, `service.create`…, at epoch ms. */
interface RunEvent {
  runId: number;
  what: string;
  at: number;
}

/**
 * Records the engine's container and service events while `body` runs, by run (the container's gated.run
 * label, the service's name): where a run's time goes, seen from the engine, for either runtime.
 */
async function withEvents<T>(
  docker: Docker,
  body: () => Promise<T>,
): Promise<{ value: T; events: RunEvent[] }> {
  const events: RunEvent[] = [];
  const stream = (await docker.getEvents({
    filters: { type: ['container', 'service'] },
  })) as NodeJS.ReadableStream & { destroy(): void };
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      if (!line.trim()) continue;
      const e = JSON.parse(line) as {
        Type: string;
        Action: string;
        timeNano: number;
        Actor?: { Attributes?: Record<string, string> };
      };
      const attrs = e.Actor?.Attributes ?? {};
      const run = attrs['gated.run'] ?? /-run-(\d+)$/.exec(attrs.name ?? '')?.[1];
      // exec_* and the like carry the command after a colon; the phase is the verb.
      const action = e.Action.split(':')[0]!;
      if (run) events.push({ runId: Number(run), what: `${e.Type}.${action}`, at: e.timeNano / 1e6 });
    }
  });
  try {
    const value = await body();
    // The last run's removal events come after its end was recorded.
    await new Promise((r) => setTimeout(r, 1500));
    return { value, events };
  } finally {
    stream.destroy();
  }
}

/** Medians of `gatedCycles` on `kind`, and the median time of each engine event of a run from its ingest. */
async function cycles(docker: Docker, kind: 'docker' | 'swarm', host: string, image: string, runs: number) {
  const { value: r, events } = await withEvents(docker, () => gatedCycles(kind, host, image, runs));
  const phases = new Map<string, number[]>();
  for (const { runId, ingestAt } of r.traced) {
    const seen = new Set<string>();
    for (const e of events) {
      if (e.runId !== runId || seen.has(e.what)) continue;
      seen.add(e.what);
      phases.set(e.what, [...(phases.get(e.what) ?? []), e.at - ingestAt]);
    }
  }
  return { reply: r.reply, cycle: r.cycle, phases };
}

type Cycles = Awaited<ReturnType<typeof cycles>>;

/** Rounds of docker and swarm runs taken in turn (the order swapped each round), merged per runtime. */
async function interleaved(dockerd: TestDockerd, image: string, runs: number) {
  const rounds = Math.min(3, runs);
  const merged = { docker: [] as Cycles[], swarm: [] as Cycles[] };
  for (let i = 0; i < rounds; i++) {
    const n = Math.ceil(runs / rounds);
    const order: Array<'docker' | 'swarm'> = i % 2 ? ['swarm', 'docker'] : ['docker', 'swarm'];
    for (const kind of order) merged[kind].push(await cycles(dockerd.docker, kind, dockerd.host, image, n));
  }
  const flat = (cs: Cycles[]) => {
    const phases = new Map<string, number[]>();
    for (const c of cs) for (const [k, v] of c.phases) phases.set(k, [...(phases.get(k) ?? []), ...v]);
    return { reply: cs.flatMap((c) => c.reply), cycle: cs.flatMap((c) => c.cycle), phases };
  };
  return { docker: flat(merged.docker), swarm: flat(merged.swarm) };
}

// The phases of a run in the order they happen, each as ms from the message's ingest (medians).
const PHASES = [
  'service.create',
  'container.create',
  'container.attach',
  'container.start',
  'reply',
  'container.die',
  'cycle',
  'container.destroy',
  'service.remove',
];

/** The phase table: per phase, the median ms from ingest for each runtime, and swarm − docker. */
function phaseTable(d: Cycles, s: Cycles) {
  const at = (c: Cycles, k: string) => {
    const xs = k === 'reply' ? c.reply : k === 'cycle' ? c.cycle : c.phases.get(k);
    return xs?.length ? Math.round(median(xs)) : undefined;
  };
  return PHASES.map((phase) => {
    const docker = at(d, phase);
    const swarm = at(s, phase);
    return {
      phase,
      dockerMs: docker ?? '-',
      swarmMs: swarm ?? '-',
      swarmMinusDockerMs: docker !== undefined && swarm !== undefined ? swarm - docker : '-',
    };
  });
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
  const gwbridgeBefore = existsSync(GWBRIDGE);
  const dockerd = await swarmEngine();
  try {
    const image = await dockerd.buildAgentImage('gated-bench-agent:latest');
    const { docker, swarm } = await interleaved(dockerd, image, runs);
    const held = await holdConcurrent(dockerd, image, concurrent);
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      scenario: 'swarm',
      runs,
      dockerReplyMedianMs: Math.round(median(docker.reply)),
      swarmReplyMedianMs: Math.round(median(swarm.reply)),
      replyRatio: round(median(swarm.reply) / median(docker.reply)),
      dockerCycleMedianMs: Math.round(median(docker.cycle)),
      swarmCycleMedianMs: Math.round(median(swarm.cycle)),
      cycleRatio: round(median(swarm.cycle) / median(docker.cycle)),
      concurrentAsked: concurrent,
      concurrentAlive: held.alive,
      concurrentAllAnsweredMs: Math.round(held.allAnsweredMs),
      memPerRunMiB: round(held.memPerRunMiB),
      phases: phaseTable(docker, swarm),
    };
  } finally {
    await dockerd.docker.swarmLeave({ force: true }).catch(() => undefined);
    await dockerd.stop();
    if (!gwbridgeBefore && existsSync(GWBRIDGE)) execFileSync('ip', ['link', 'delete', 'docker_gwbridge']);
  }
}
