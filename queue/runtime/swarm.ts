import type { Metrics } from '../../core/metrics.js';
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { attachRaw } from './attach.js';
import { handleOf } from './docker.js';
import { checkEngine, EngineError, engineError, unreachableError } from './engine.js';
import { onceUntilDone, prepareWorkspace, WORKSPACE, type Workspace } from './mounts.js';
import { INSTANCE_LABEL, limitsOf, runLabels, sweepEvery, type ContainerOptions } from './lockdown.js';
import { SparePool } from './swarm-spare.js';
import { ContainerEvents, nodeOf, startedTask, type StartedTask } from './swarm-task.js';
import type { AgentHandle, Runtime, RunSpec } from './types.js';

/**
 * Agents as one-shot Docker Swarm services: each run is a service with one replica and restart condition
 * `none`, placed by the swarm on any node that satisfies the group's constraints, with the same lockdown
 * as the docker runtime. The service API has no stdin, so the run's task container is attached on the
 * engine of the node that runs it; closing that stream never reaches the agent as EOF, so end of input is
 * the protocol's explicit line `{"type":"end"}` (docs/PROTOCOL.md). The start is taken from that engine's
 * events, not from the task list, which learns it late (swarm-task.ts). docs/SCALING.md says how to run it.
 */

/** Where a group's runs may go and what they reserve (registered_groups.swarm, JSON). */
export interface SwarmPlacement {
  /** Swarm placement constraints, e.g. `node.labels.agents==true`. */
  constraints?: string[];
  /** Memory and CPU (in cores) the scheduler reserves for one run. */
  reserveMemoryBytes?: number;
  reserveCpus?: number;
}

/** Options of the swarm runtime: the container options, the manager and where each group's runs go. */
export interface SwarmRuntimeOptions extends ContainerOptions {
  /** A client of a swarm manager. */
  docker: Docker;
  /** The engine that runs a task, by node id; default: the manager itself (a single-node swarm). */
  nodeEngine?: (nodeId: string) => Docker | Promise<Docker>;
  /** The group's placement, looked up per run (registered_groups). */
  placement?: (group: string) => SwarmPlacement | undefined;
  /** Longest wait for the task's container to exist. Default 60 s. */
  startTimeoutMs?: number;
  /** Told about each started task: its node and create → running time (gated's metrics registry). */
  metrics?: Pick<Metrics, 'agentStarted'>;
  /**
   * Spares: the service of a lane's next run made when a run of that lane ends, so that the next run
   * skips the swarm's scheduling (swarm-spare.ts). At most this many at once; default 0 (none).
   */
  spares?: number;
  /** How long a spare waits for its run before it is removed. Default 10 minutes. */
  spareIdleMs?: number;
}

/** The swarm runtime, plus the sweep of this instance's leftover services. */
export interface SwarmRuntime extends Runtime {
  /** Removes this instance's services that belong to no live run. Returns how many. */
  sweep(): Promise<number>;
  /** Service create → task running, per run (ms), for /metrics and the benchmarks. */
  readonly startLatencies: number[];
}

/** The line that ends a swarm agent's input. */
export const END_OF_INPUT = '{"type":"end"}\n';

/** Who a service is: its name and labels (a run's, or a spare's until a run takes it). */
interface Identity {
  name: string;
  labels: Record<string, string>;
}

/** The service of one run: one replica, never restarted, the lockdown of every agent, placed as the group says. */
function serviceSpec(
  opts: SwarmRuntimeOptions,
  spec: RunSpec,
  where: Workspace,
  who: Identity,
): Docker.CreateServiceOptions {
  const { groupDir, mounts } = where;
  const place = opts.placement?.(spec.group) ?? {};
  const labels = who.labels;
  const limits = limitsOf(opts);
  return {
    Name: who.name,
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: spec.image ?? opts.image,
        Labels: labels,
        User: where.user,
        Dir: WORKSPACE,
        // Nothing secret here: secrets travel on stdin only.
        Env: ['HOME=/tmp', 'LANG=C.UTF-8'],
        OpenStdin: true,
        TTY: false,
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        // Honoured by engines whose API has it (1.44+); older ones ignore it, and with every capability
        // dropped from the bounding set a setuid binary gains nothing anyway.
        Privileges: { NoNewPrivileges: true },
        Mounts: [
          { Type: 'bind', Source: groupDir, Target: WORKSPACE, ReadOnly: false },
          ...mounts.map((m) => ({
            Type: 'bind',
            Source: m.source,
            Target: m.target,
            ReadOnly: m.readOnly,
          })),
          { Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: limits.tmpfsBytes } },
        ],
      },
      Resources: {
        Limits: { MemoryBytes: limits.memoryBytes, NanoCPUs: limits.nanoCpus, Pids: limits.pidsLimit },
        Reservations: {
          ...(place.reserveMemoryBytes ? { MemoryBytes: place.reserveMemoryBytes } : {}),
          ...(place.reserveCpus ? { NanoCPUs: Math.round(place.reserveCpus * 1e9) } : {}),
        },
      },
      RestartPolicy: { Condition: 'none', MaxAttempts: 0 },
      Placement: { Constraints: place.constraints ?? [] },
      // The group's own network (registered_groups.network: an overlay, or `host`); without one, no
      // Networks: the task then has only loopback (a swarm refuses `none` by name).
      ...(spec.network ? { Networks: [{ Target: spec.network }] } : {}),
    },
    Mode: { Replicated: { Replicas: 1 } },
  } as unknown as Docker.CreateServiceOptions;
}

/** Checks that the engine answers, has the image, and is a swarm manager. */
async function pingManager(docker: Docker, image: string, where: string): Promise<void> {
  await checkEngine(docker, where, [image]);
  try {
    await docker.swarmInspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 503) {
      throw new EngineError(
        'not_swarm',
        `the engine at ${where} is not a swarm manager: run 'docker swarm init' there`,
      );
    }
    throw engineError(err, where);
  }
}

/** Removes this instance's services that belong to no live run; returns how many. */
async function sweepServices(
  docker: Docker,
  instanceId: string,
  live: ReadonlySet<string>,
  log: ContainerOptions['log'],
): Promise<number> {
  const services = await docker.listServices({ filters: { label: [`${INSTANCE_LABEL}=${instanceId}`] } });
  const dead = services.filter((s) => !live.has(s.ID));
  for (const s of dead)
    await docker
      .getService(s.ID)
      .remove()
      .catch(() => undefined);
  if (dead.length) log?.info({ removed: dead.length }, 'removed agent services of dead runs');
  return dead.length;
}

/** What the start and cleanup paths of one swarm runtime share. */
interface SwarmState {
  opts: SwarmRuntimeOptions;
  where: string;
  /**
   * Services of runs (and spares) this process is serving; anything else with our instance label is a dead
   * run's (one gated owns an instance id, so nobody else can be serving it).
   */
  live: Set<string>;
  startLatencies: number[];
  /** The sweep of dead runs' services, once per runtime; a failed one is tried again by the next start. */
  sweptOnce: () => Promise<number>;
  /** Services made ahead of their runs, one per lane (swarm-spare.ts). */
  spares: SparePool<Launched>;
  /** Names this runtime's spares apart from any other process's. */
  spareTag: string;
}

/** Creates the swarm runtime. */
export function createSwarmRuntime(opts: SwarmRuntimeOptions): SwarmRuntime {
  const { docker, log } = opts;
  const where = opts.where ?? 'the swarm manager';
  const live = new Set<string>();
  const sweep = () => sweepServices(docker, opts.instanceId, live, log);
  const state: SwarmState = {
    opts,
    where,
    live,
    startLatencies: [],
    sweptOnce: onceUntilDone(sweep),
    spareTag: randomBytes(4).toString('hex'),
    spares: new SparePool<Launched>(opts.spares ?? 0, opts.spareIdleMs ?? 600_000, (l) =>
      removeService(state, l.serviceId),
    ),
  };
  const stopSweeping = sweepEvery(opts.sweepEveryMs ?? 60_000, sweep, (err) =>
    log?.warn({ err: err.message }, 'swarm sweep failed'),
  );
  return {
    name: 'swarm',
    sweep,
    startLatencies: state.startLatencies,
    async close() {
      stopSweeping();
      await state.spares.close();
    },
    ping: () => pingManager(docker, opts.image, where),
    async start(spec: RunSpec): Promise<AgentHandle> {
      // An engine that is not there is named as such: the queue retries without blaming the messages.
      return startTask(state, spec).catch((err: unknown) => {
        throw unreachableError(err, where) ?? err;
      });
    },
  };
}

/** The engine that runs a task on the given node: the node's own, or the manager's. */
async function engineOf(opts: SwarmRuntimeOptions, nodeId: string | undefined): Promise<Docker> {
  return nodeId && opts.nodeEngine ? await opts.nodeEngine(nodeId) : opts.docker;
}

/** A service whose task's container started: the service, the engine of its node, the task. */
interface Launched {
  serviceId: string;
  engine: Docker;
  task: StartedTask;
}

/**
 * Creates a service and waits for its task's container to start (on its node's events); on failure,
 * removes it. `watched` are labels only this service's container carries.
 */
async function launch(
  state: SwarmState,
  body: Docker.CreateServiceOptions,
  watched: Record<string, string>,
): Promise<Launched> {
  const { opts } = state;
  const { docker } = opts;
  const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
  // On one engine the container's labels are listened for before the service exists, so its start cannot
  // be missed.
  let events = opts.nodeEngine ? undefined : await ContainerEvents.open(docker, watched);
  let serviceId: string | undefined;
  try {
    const created = (await docker.createService(body)) as { id?: string; ID?: string };
    serviceId = created.id ?? created.ID!;
    state.live.add(serviceId);
    let engine = docker;
    if (!events) {
      engine = await engineOf(opts, await nodeOf(docker, serviceId, deadline));
      events = await ContainerEvents.open(engine, watched);
    }
    const task = await startedTask(docker, serviceId, events, deadline);
    events.close();
    return { serviceId, engine, task };
  } catch (err) {
    events?.close();
    if (serviceId) await removeService(state, serviceId);
    throw err;
  }
}

/**
 * Starts a run: on its lane's spare when there is one made with the same spec, else on a service created
 * now; then attaches. When the run ends, the lane's next spare is made.
 */
async function startTask(state: SwarmState, spec: RunSpec): Promise<AgentHandle> {
  const { opts } = state;
  await state.sweptOnce();
  const where = prepareWorkspace(spec, opts.groupsDir, opts.mountAllow ?? [], opts.user);
  const t0 = performance.now();
  const lane = `${spec.group}\0${spec.topic}`;
  const prefix = `gated-${opts.instanceId.slice(0, 12)}`;
  // The spec without who it is for: a spare serves a run whose service would be the same but for that.
  const key = JSON.stringify(serviceSpec(opts, spec, where, { name: '', labels: {} }));
  const labels = runLabels(opts.instanceId, spec);
  const spare = await fromSpare(state, state.spares.take(lane, key));
  const launched =
    spare ??
    (await launch(state, serviceSpec(opts, spec, where, { name: `${prefix}-run-${spec.runId}`, labels }), {
      [INSTANCE_LABEL]: opts.instanceId,
      'gated.run': String(spec.runId),
    }));
  const handle = await attachTask(state, { spec, ...launched, t0, onSpare: spare !== undefined }).catch(
    async (err: unknown) => {
      await removeService(state, launched.serviceId);
      throw err;
    },
  );
  // The lane's next run gets a spare made when this one ends: its start then competes with no run of the
  // lane, and a lane holds one container at a time (its run's or its spare).
  void handle.exited.then((exit) => {
    if (exit.engineLost) return;
    state.spares.offer(lane, key, (n) => {
      // Until a run takes it, a spare's container is known by a label of its own (a container's labels
      // cannot change later); unique across gated processes, as a dead process's spares may still be dying.
      const tag = `${state.spareTag}-${n}`;
      const { 'gated.run': _run, ...own } = labels;
      const body = serviceSpec(opts, spec, where, {
        name: `${prefix}-spare-${tag}`,
        labels: { ...own, 'gated.spare': tag },
      });
      return launch(state, body, { [INSTANCE_LABEL]: opts.instanceId, 'gated.spare': tag });
    });
  });
  return handle;
}

/**
 * A taken spare, once its container runs; undefined (and the spare removed) when it could not start or its
 * agent is gone already (then the run starts as if there had been no spare).
 */
async function fromSpare(
  state: SwarmState,
  spare: Promise<Launched> | undefined,
): Promise<Launched | undefined> {
  const launched = await spare?.catch(() => undefined);
  if (!launched) return undefined;
  const info = await launched.engine
    .getContainer(launched.task.containerId)
    .inspect()
    .catch(() => undefined);
  if (info?.State?.Running) return launched;
  await removeService(state, launched.serviceId);
  return undefined;
}

/** Removes a run's service (gone already is fine) and forgets it as live. */
async function removeService(state: SwarmState, serviceId: string): Promise<void> {
  await state.opts.docker
    .getService(serviceId)
    .remove()
    .catch(() => undefined);
  state.live.delete(serviceId);
}

/** A run whose task has started: its service, the engine of its node, and when its start began. */
interface StartedRun extends Launched {
  spec: RunSpec;
  t0: number;
  /** The run took its lane's spare (made before its message). */
  onSpare: boolean;
}

/** Attaches to the started task's container; the handle removes the service when the run ends. */
async function attachTask(state: SwarmState, run: StartedRun): Promise<AgentHandle> {
  const { opts, startLatencies } = state;
  const { spec, serviceId, engine, task } = run;
  const container = engine.getContainer(task.containerId);
  // Attached after start: `logs` replays what the agent wrote before, so no output is missed.
  const socket = await attachRaw(engine, task.containerId, { logs: true });
  const waiting = container.wait({ condition: 'not-running' }) as Promise<{ StatusCode?: number }>;
  const ms = performance.now() - run.t0;
  startLatencies.push(ms);
  if (startLatencies.length > 1000) startLatencies.shift();
  opts.metrics?.agentStarted('swarm', task.nodeId ?? 'unknown', ms / 1000);
  opts.log?.debug(
    { runId: spec.runId, service: serviceId.slice(0, 12), node: task.nodeId, onSpare: run.onSpare, ms },
    'agent task started',
  );
  return handleOf(container, socket, waiting, () => removeService(state, serviceId), engine.modem, {
    where: state.where,
    endLine: END_OF_INPUT,
  });
}
