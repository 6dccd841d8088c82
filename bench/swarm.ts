import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import type Docker from 'dockerode';
import { startDockerd, type TestDockerd } from '../test/infra/dockerd.js';
import { gatedCycles } from './docker.js';
import { benchInstance, pct } from './pipeline.js';
import { EngineDebug, SWARM_STEPS, swarmSteps } from './swarm-log.js';

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

async function swarmEngine(debug: EngineDebug): Promise<TestDockerd> {
  const dockerd = await startDockerd(60_000, {
    env: { DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: '1' },
    args: debug.args,
  });
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

/** One engine event: `container.start`, `service.create`…, at epoch ms, with its object's id and attributes. */
interface EngineEvent {
  what: string;
  at: number;
  id: string;
  attrs: Record<string, string>;
}

/** Records the engine's container and service events while `body` runs. */
async function withEvents<T>(
  docker: Docker,
  body: () => Promise<T>,
): Promise<{ value: T; events: EngineEvent[] }> {
  const events: EngineEvent[] = [];
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
        Actor?: { ID?: string; Attributes?: Record<string, string> };
      };
      // exec_* and the like carry the command after a colon; the phase is the verb.
      const action = e.Action.split(':')[0]!;
      const at = e.timeNano / 1e6;
      events.push({
        what: `${e.Type}.${action}`,
        at,
        id: e.Actor?.ID ?? '',
        attrs: e.Actor?.Attributes ?? {},
      });
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

/**
 * The engine events of one run: those of its container and of that container's service. The container is
 * the one labelled with the run; a run served by a spare (made before the run, labelled as a spare) has the
 * container that was attached to between its message's ingest and its end.
 */
function runEvents(events: EngineEvent[], run: { runId: number; ingestAt: number; cycleMs: number }) {
  const labelled = events.find(
    (e) => e.what.startsWith('container.') && e.attrs['gated.run'] === String(run.runId),
  );
  const attached = events.find(
    (e) => e.what === 'container.attach' && e.at >= run.ingestAt && e.at <= run.ingestAt + run.cycleMs,
  );
  const container = labelled ?? attached;
  if (!container) return [];
  const service = container.attrs['com.docker.swarm.service.name'];
  return events.filter(
    (e) =>
      (e.what.startsWith('container.') && e.id === container.id) ||
      (service !== undefined && e.what.startsWith('service.') && e.attrs.name === service),
  );
}

/** How one runtime is measured: docker or swarm, each run a new group's or one group's next. */
type Kind = 'docker' | 'docker-next' | 'swarm' | 'swarm-spare';
const KINDS: Kind[] = ['docker', 'swarm', 'docker-next', 'swarm-spare'];

/** Medians of `gatedCycles` on `kind`, and the time of each engine event of a run from its ingest. */
async function cycles(docker: Docker, kind: Kind, host: string, image: string, runs: number) {
  const runtime = kind.startsWith('docker') ? 'docker' : 'swarm';
  const next = kind.endsWith('-next') || kind === 'swarm-spare';
  const opts = {
    // A new group's first run (no spare can exist), or the next run of one group (on its spare, for swarm)
    // a second after the previous one ended, the time a spare needs to be up here. (With an idle timeout, a
    // message while a run lives goes to that run; a new run is for a message after it ended, 30 s after its
    // last reply by default.)
    sameGroup: next,
    gapMs: next ? 1000 : 0,
    env: { GATED_SWARM_SPARES: kind === 'swarm-spare' ? '8' : '0' },
  };
  const { value: r, events } = await withEvents(docker, () => gatedCycles(runtime, host, image, runs, opts));
  const phases = new Map<string, number[]>();
  for (const run of r.traced) {
    const seen = new Set<string>();
    for (const e of runEvents(events, run)) {
      if (seen.has(e.what)) continue;
      seen.add(e.what);
      phases.set(e.what, [...(phases.get(e.what) ?? []), e.at - run.ingestAt]);
    }
  }
  return { reply: r.reply, cycle: r.cycle, phases };
}

type Cycles = Awaited<ReturnType<typeof cycles>>;

/** Rounds of every kind taken in turn (the order rotated each round), merged per kind. */
async function interleaved(dockerd: TestDockerd, image: string, runs: number) {
  const rounds = Math.min(3, runs);
  const merged = new Map<Kind, Cycles[]>(KINDS.map((k) => [k, []]));
  for (let i = 0; i < rounds; i++) {
    const n = Math.ceil(runs / rounds);
    const order = [...KINDS.slice(i % KINDS.length), ...KINDS.slice(0, i % KINDS.length)];
    for (const kind of order)
      merged.get(kind)!.push(await cycles(dockerd.docker, kind, dockerd.host, image, n));
  }
  const flat = (cs: Cycles[]): Cycles => {
    const phases = new Map<string, number[]>();
    for (const c of cs) for (const [k, v] of c.phases) phases.set(k, [...(phases.get(k) ?? []), ...v]);
    return { reply: cs.flatMap((c) => c.reply), cycle: cs.flatMap((c) => c.cycle), phases };
  };
  return new Map(KINDS.map((k) => [k, flat(merged.get(k)!)]));
}

// The phases of a run in the order they happen, each as ms from the message's ingest (medians). A run on a
// spare has its service and container made before its message: those phases are negative.
const PHASES = [
  'service.create',
  'container.create',
  'container.start',
  'container.attach',
  'reply',
  'container.die',
  'cycle',
  'container.destroy',
  'service.remove',
];

/** The phase table: per phase, the median ms from ingest for each kind of run. */
function phaseTable(all: Map<Kind, Cycles>) {
  const at = (c: Cycles, k: string) => {
    const xs = k === 'reply' ? c.reply : k === 'cycle' ? c.cycle : c.phases.get(k);
    return xs?.length ? Math.round(median(xs)) : '-';
  };
  return PHASES.map((phase) => ({
    phase,
    ...Object.fromEntries(KINDS.map((k) => [`${k}Ms`, at(all.get(k)!, phase)])),
  }));
}

/**
 * Table 9c: `runs` new groups' runs on the swarm with the engine's debug log on, and per step of their
 * tasks inside the swarm, the ms from the service's create (median, min, max).
 */
async function insideSwarm(dockerd: TestDockerd, debug: EngineDebug, image: string, runs: number) {
  const pidFile = join(dockerd.dir, 'dockerd.pid');
  await debug.set(true, pidFile);
  try {
    const { events } = await withEvents(dockerd.docker, () =>
      gatedCycles('swarm', dockerd.host, image, runs, { env: { GATED_SWARM_SPARES: '0' } }),
    );
    const created = new Map(events.filter((e) => e.what === 'service.create').map((e) => [e.id, e.at]));
    const steps = swarmSteps(readFileSync(join(dockerd.dir, 'dockerd.log'), 'utf8'), created);
    return SWARM_STEPS.map((step) => {
      const xs = steps.get(step) ?? [];
      return {
        step,
        tasks: xs.length,
        medianMs: xs.length ? Math.round(median(xs)) : '-',
        minMs: xs.length ? Math.round(Math.min(...xs)) : '-',
        maxMs: xs.length ? Math.round(Math.max(...xs)) : '-',
      };
    });
  } finally {
    await debug.set(false, pidFile);
  }
}

/** Keeps `n` swarm runs alive at once (an idle timeout long enough), then reads their memory use. */
async function holdConcurrent(dockerd: TestDockerd, image: string, n: number) {
  const inst = await benchInstance({
    groups: n,
    maxConcurrent: n,
    idleMs: 120_000,
    runtime: { kind: 'swarm', host: dockerd.host, image },
    // Runs only: spares would add an idle container per group.
    env: { GATED_SWARM_SPARES: '0' },
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
  const debug = new EngineDebug();
  const dockerd = await swarmEngine(debug).catch((err: unknown) => {
    debug.remove();
    throw err;
  });
  try {
    const image = await dockerd.buildAgentImage('gated-bench-agent:latest');
    const all = await interleaved(dockerd, image, runs);
    const inside = await insideSwarm(dockerd, debug, image, Math.min(runs, 9));
    const held = await holdConcurrent(dockerd, image, concurrent);
    const round = (x: number) => Math.round(x * 100) / 100;
    const med = (k: Kind, m: 'reply' | 'cycle') => median(all.get(k)![m]);
    return {
      scenario: 'swarm',
      runs,
      dockerReplyMedianMs: Math.round(med('docker', 'reply')),
      swarmReplyMedianMs: Math.round(med('swarm', 'reply')),
      replyRatio: round(med('swarm', 'reply') / med('docker', 'reply')),
      dockerCycleMedianMs: Math.round(med('docker', 'cycle')),
      swarmCycleMedianMs: Math.round(med('swarm', 'cycle')),
      cycleRatio: round(med('swarm', 'cycle') / med('docker', 'cycle')),
      // The next run of a conversation: docker as before, swarm on the spare the previous run made.
      nextDockerReplyMedianMs: Math.round(med('docker-next', 'reply')),
      nextSwarmReplyMedianMs: Math.round(med('swarm-spare', 'reply')),
      nextReplyRatio: round(med('swarm-spare', 'reply') / med('docker-next', 'reply')),
      nextDockerCycleMedianMs: Math.round(med('docker-next', 'cycle')),
      nextSwarmCycleMedianMs: Math.round(med('swarm-spare', 'cycle')),
      nextCycleRatio: round(med('swarm-spare', 'cycle') / med('docker-next', 'cycle')),
      concurrentAsked: concurrent,
      concurrentAlive: held.alive,
      concurrentAllAnsweredMs: Math.round(held.allAnsweredMs),
      memPerRunMiB: round(held.memPerRunMiB),
      phases: phaseTable(all),
      inside,
    };
  } finally {
    await dockerd.docker.swarmLeave({ force: true }).catch(() => undefined);
    await dockerd.stop();
    debug.remove();
    if (!gwbridgeBefore && existsSync(GWBRIDGE)) execFileSync('ip', ['link', 'delete', 'docker_gwbridge']);
  }
}
