import type { Duplex } from 'node:stream';
import { PassThrough, Writable } from 'node:stream';
import Docker from 'dockerode';
import type { Logger } from '../../core/log.js';
import { attachRaw } from './attach.js';
import { checkEngine, unreachableError } from './engine.js';
import { onceUntilDone, prepareWorkspace, withGit, WORKSPACE, type Workspace } from './mounts.js';
import { readyWorktreeGit, takingInAfter } from './worktree-git.js';
import { INSTANCE_LABEL, limitsOf, runLabels, sweepEvery, type ContainerOptions } from './lockdown.js';
import { TailBuffer, type AgentExit, type AgentHandle, type Runtime, type RunSpec } from './types.js';

/** Options of the docker runtime: the container options and the engine client. */
export interface DockerRuntimeOptions extends ContainerOptions {
  /** The engine client; default `new Docker()`, which honours DOCKER_HOST (a remote engine serves too). */
  docker?: Docker;
  /**
   * How often containers of dead runs are looked for while a removal is owed (the engine was gone when a
   * run ended). Default 60 s; 0: only at the next start (tests).
   */
  sweepEveryMs?: number;
}

/** The docker runtime, plus the sweep of this instance's leftover containers. */
export interface DockerRuntime extends Runtime {
  /**
   * Removes this instance's containers that belong to no live run (left by a crash of gated, or by runs
   * that ended while the engine was gone). Returns how many.
   */
  sweep(): Promise<number>;
}

export { INSTANCE_LABEL };

// Time allowed for the attach stream to deliver its last bytes after the container has exited.
const DRAIN_MS = 2000;
// After the attach stream closed without an exit being reported, how long to wait before asking the engine
// whether the container still runs (an engine that died closes the stream and never answers the wait).
const PROBE_MS = 1000;

/**
 * This instance's containers and which of them belong to live runs. A run is live from before its container
 * is created until its removal was tried: anything else with our instance label is a dead run's (one gated
 * owns an instance id). A removal that failed (the engine was gone) is owed to the next sweep.
 */
class ContainerSweep {
  readonly live = new Set<string>();
  owed = false;
  /** The first sweep of this runtime; a failed one (engine down) is tried again by the next start. */
  readonly once: () => Promise<unknown>;

  constructor(
    private readonly docker: Docker,
    private readonly instanceId: string,
    private readonly log: Logger | undefined,
  ) {
    this.once = onceUntilDone(() => this.sweep());
  }

  async sweep(): Promise<number> {
    const ours = await this.docker.listContainers({
      all: true,
      filters: { label: [`${INSTANCE_LABEL}=${this.instanceId}`] },
    });
    const dead = ours.filter((c) => !this.live.has(c.Labels?.['gated.run'] ?? ''));
    let left = 0;
    for (const c of dead) {
      await this.docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch((err: { statusCode?: number }) => {
          if (err.statusCode !== 404) left++;
        });
    }
    this.owed = left > 0;
    if (dead.length) this.log?.info({ removed: dead.length - left }, 'removed agent containers of dead runs');
    return dead.length - left;
  }

  async ifOwed(): Promise<void> {
    if (this.owed) await this.sweep();
  }
}

/** The create options of one run's container: the lockdown every agent gets, its workspace and mounts. */
function containerConfig(opts: DockerRuntimeOptions, spec: RunSpec, workspace: Workspace) {
  const { groupDir, mounts } = workspace;
  const limits = limitsOf(opts);
  return {
    Image: spec.image ?? opts.image,
    User: workspace.user,
    WorkingDir: WORKSPACE,
    // Nothing secret here: secrets travel on stdin only.
    Env: ['HOME=/tmp', 'LANG=C.UTF-8', ...(workspace.env ?? [])],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    StdinOnce: true,
    Tty: false,
    Labels: runLabels(opts.instanceId, spec),
    HostConfig: {
      Mounts: [
        { Type: 'bind' as const, Source: groupDir, Target: WORKSPACE, ReadOnly: false },
        ...mounts.map((m) => ({
          Type: 'bind' as const,
          Source: m.source,
          Target: m.target,
          ReadOnly: m.readOnly,
        })),
      ],
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${limits.tmpfsBytes}` },
      Memory: limits.memoryBytes,
      MemorySwap: limits.memoryBytes,
      NanoCpus: limits.nanoCpus,
      PidsLimit: limits.pidsLimit,
      // The group's own network (registered_groups.network); without one, none at all.
      NetworkMode: spec.network ?? 'none',
      AutoRemove: false,
    },
  };
}

/** Creates the docker runtime. */
export function createDockerRuntime(opts: DockerRuntimeOptions): DockerRuntime {
  const docker = opts.docker ?? new Docker();
  const log = opts.log;
  const where = opts.where ?? 'the docker engine';
  const sweeper = new ContainerSweep(docker, opts.instanceId, log);
  const stopSweeping = sweepEvery(
    opts.sweepEveryMs ?? 60_000,
    () => sweeper.ifOwed(),
    (err) => log?.debug({ err: err.message }, 'docker sweep failed; tried again later'),
  );

  return {
    name: 'docker',
    sweep: () => sweeper.sweep(),
    async ping() {
      await checkEngine(docker, where, [opts.image]);
    },
    async close() {
      stopSweeping();
    },
    async start(spec: RunSpec): Promise<AgentHandle> {
      const run = String(spec.runId);
      try {
        await sweeper.once();
        await sweeper.ifOwed();
        const workspace = prepareWorkspace(spec, opts.groupsDir, opts.mountAllow ?? [], opts.user);
        // A topic's worktree: its git folders beside it, its commits taken in after (worktree-git.ts).
        const git = spec.work ? await readyWorktreeGit(spec.work, workspace.user) : undefined;
        sweeper.live.add(run);
        const handle = await startContainer(spec, git ? withGit(workspace, git) : workspace);
        return spec.work ? takingInAfter(handle, spec.work, log, spec.runId) : handle;
      } catch (err) {
        sweeper.live.delete(run);
        // An engine that is not there is named as such: the queue retries without blaming the messages.
        throw unreachableError(err, where) ?? err;
      }
    },
  };

  async function startContainer(spec: RunSpec, workspace: Workspace) {
    const container = await docker.createContainer(containerConfig(opts, spec, workspace));
    const remove = async () => {
      try {
        await container.remove({ force: true, v: true });
      } catch (err) {
        // Gone already is done; anything else (the engine is away) is owed to the next sweep.
        if ((err as { statusCode?: number }).statusCode !== 404) sweeper.owed = true;
      }
      sweeper.live.delete(String(spec.runId));
    };
    let socket: Duplex;
    try {
      socket = await attachRaw(docker, container.id);
    } catch (err) {
      await remove();
      throw err;
    }
    // Waiting for the next exit is registered before the start, so an agent that exits at once is seen;
    // a plain wait on a container that is only created would return at once.
    const waiting = container.wait({ condition: 'next-exit' }) as Promise<{ StatusCode?: number }>;
    try {
      await container.start();
    } catch (err) {
      waiting.catch(() => undefined);
      socket.destroy();
      await remove();
      throw err;
    }
    const handle = handleOf(container, socket, waiting, remove, docker.modem, { where });
    log?.debug({ runId: spec.runId, container: container.id.slice(0, 12) }, 'agent container started');
    return handle;
  }
}

/** How a container ended, as far as the engine could tell. */
interface ContainerEnd {
  code: number | null;
  /** The engine stopped answering: why. */
  lost?: string;
}

const sleep = (ms: number) => new Promise<undefined>((r) => setTimeout(() => r(undefined), ms));

/**
 * Waits for the container's exit. The engine reports it on `waiting`; an engine that dies closes the attach
 * stream and never answers the wait, so once the stream has closed without an exit the engine is asked
 * every PROBE_MS, and a refused connection means the agent is lost with it (the run then ends at once
 * instead of hanging until its hard timeout).
 */
async function endOf(
  container: Docker.Container,
  waiting: Promise<{ StatusCode?: number }>,
  streamDone: Promise<void>,
  where: string,
): Promise<ContainerEnd> {
  const waited = waiting.then(
    (res): ContainerEnd => ({ code: typeof res.StatusCode === 'number' ? res.StatusCode : null }),
    (err: unknown): ContainerEnd => {
      const lost = unreachableError(err, where);
      return lost ? { code: null, lost: lost.message } : { code: null };
    },
  );
  const first = await Promise.race([waited, streamDone.then(() => undefined)]);
  if (first) return first;
  for (;;) {
    const end = await Promise.race([waited, sleep(PROBE_MS)]);
    if (end) return end;
    try {
      const info = await container.inspect();
      if (!info.State.Running) return { code: info.State.ExitCode ?? null };
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return { code: null };
      const lost = unreachableError(err, where);
      if (lost) return { code: null, lost: lost.message };
    }
  }
}

/**
 * An AgentHandle over a container's attach stream. `where` names the engine in errors; `endLine`, when
 * given, is how end of input is said: written as a last line instead of half-closing the stream (a swarm
 * task's stdin never sees EOF).
 */
export function handleOf(
  container: Docker.Container,
  socket: Duplex,
  waiting: Promise<{ StatusCode?: number }>,
  remove: () => Promise<unknown>,
  modem: Docker['modem'],
  how: { where: string; endLine?: string },
): AgentHandle {
  const { endLine } = how;
  const stdout = new PassThrough();
  const stderr = new TailBuffer();
  const stderrSink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      stderr.push(chunk);
      cb();
    },
  });
  modem.demuxStream(socket, stdout, stderrSink);
  let stdinOpen = true;
  let killed = false;
  const streamDone = new Promise<void>((resolve) => {
    const done = () => {
      stdinOpen = false;
      resolve();
    };
    socket.once('end', done);
    socket.once('close', done);
    socket.once('error', done);
  });

  const exited = (async (): Promise<AgentExit> => {
    const { code, lost } = await endOf(container, waiting, streamDone, how.where);
    stdinOpen = false;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([streamDone, new Promise((r) => (timer = setTimeout(r, DRAIN_MS)))]);
    clearTimeout(timer);
    socket.destroy();
    stdout.end();
    await remove();
    return {
      code,
      signal: killed ? 'SIGKILL' : null,
      stderrTail: stderr.toString(),
      ...(lost ? { engineLost: lost } : {}),
    };
  })();

  return {
    stdout,
    get stdinOpen() {
      return stdinOpen && socket.writable;
    },
    write(line) {
      if (!stdinOpen || !socket.writable) return false;
      socket.write(line);
      return true;
    },
    closeStdin() {
      if (!stdinOpen) return;
      stdinOpen = false;
      if (endLine !== undefined) socket.write(endLine);
      // Half-close: the engine sees EOF on the attach stream and closes the agent's stdin (StdinOnce).
      else socket.end();
    },
    kill() {
      stdinOpen = false;
      killed = true;
      container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
    },
    exited,
  };
}
