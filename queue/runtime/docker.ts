import { statSync } from 'node:fs';
import type { Duplex } from 'node:stream';
import { PassThrough, Writable } from 'node:stream';
import Docker from 'dockerode';
import type { Logger } from '../../core/log.js';
import { attachRaw } from './attach.js';
import { checkEngine } from './engine.js';
import { onceUntilDone, prepareWorkspace, WORKSPACE, type ResolvedMount } from './mounts.js';
import { chownTree } from './owner.js';
import { TailBuffer, type AgentExit, type AgentHandle, type Runtime, type RunSpec } from './types.js';

/** Options of the docker runtime. Limits default to a modest agent: 1 GiB, one CPU, 256 pids. */
export interface DockerRuntimeOptions {
  /** The engine client; default `new Docker()`, which honours DOCKER_HOST (a remote engine serves too). */
  docker?: Docker;
  /** Image of groups without their own (GATED_AGENT_IMAGE). */
  image: string;
  /** This gated's id: every container carries the label `gated.instance=<id>`. */
  instanceId: string;
  /** GATED_GROUPS_DIR: a group's folder must resolve inside it. */
  groupsDir: string;
  /** Host roots that groups may mount from (GATED_MOUNT_ALLOW). */
  mountAllow?: readonly string[];
  memoryBytes?: number;
  nanoCpus?: number;
  pidsLimit?: number;
  /** Size of the tmpfs at /tmp (the root filesystem is read-only). */
  tmpfsSize?: string;
  /** Network of groups with registered_groups.network = 1; all others get `none`. */
  networkMode?: string;
  /** uid:gid of the agent; default the owner of the group's folder, or 1000:1000 when root owns it. */
  user?: string;
  /** How the engine is named in errors (`tcp://host:2376 (mutual TLS)`). */
  where?: string;
  log?: Logger;
}

/** The docker runtime, plus the sweep of this instance's leftover containers. */
export interface DockerRuntime extends Runtime {
  /** Removes containers labelled with this instance id (left by a crash). Returns how many. */
  sweep(): Promise<number>;
}

/** The label key that marks gated's containers. */
export const INSTANCE_LABEL = 'gated.instance';

// Time allowed for the attach stream to deliver its last bytes after the container has exited.
const DRAIN_MS = 2000;

/** The agent's uid:gid: configured, else the owner of the group's folder (handed to 1000:1000 when root owns it). */
export function pickUser(dir: string, configured: string | undefined): string {
  if (configured) return configured;
  const st = statSync(dir);
  if (st.uid !== 0) return `${st.uid}:${st.gid}`;
  // Root owns the folder (gated runs as root): hand it to the unprivileged agent user once, so the agent can
  // write its workspace without running as root.
  if (process.getuid?.() === 0) chownTree(dir, 1000, 1000);
  return '1000:1000';
}

/** Creates the docker runtime. */
export function createDockerRuntime(opts: DockerRuntimeOptions): DockerRuntime {
  const docker = opts.docker ?? new Docker();
  const log = opts.log;

  const sweep = async (): Promise<number> => {
    const leftovers = await docker.listContainers({
      all: true,
      filters: { label: [`${INSTANCE_LABEL}=${opts.instanceId}`] },
    });
    for (const c of leftovers) {
      await docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined);
    }
    if (leftovers.length) log?.info({ removed: leftovers.length }, 'removed leftover agent containers');
    return leftovers.length;
  };
  // Once per runtime; a failed sweep (engine down) is tried again by the next start.
  const sweptOnce = onceUntilDone(sweep);

  const containerConfig = (spec: RunSpec, groupDir: string, mounts: ResolvedMount[]) => ({
    Image: spec.image ?? opts.image,
    User: pickUser(groupDir, opts.user),
    WorkingDir: WORKSPACE,
    // Nothing secret here: secrets travel on stdin only.
    Env: ['HOME=/tmp', 'LANG=C.UTF-8'],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    StdinOnce: true,
    Tty: false,
    Labels: {
      [INSTANCE_LABEL]: opts.instanceId,
      'gated.group': spec.group,
      'gated.topic': spec.topic,
      'gated.run': String(spec.runId),
    },
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
      Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${opts.tmpfsSize ?? '64m'}` },
      Memory: opts.memoryBytes ?? 1024 * 1024 * 1024,
      MemorySwap: opts.memoryBytes ?? 1024 * 1024 * 1024,
      NanoCpus: opts.nanoCpus ?? 1_000_000_000,
      PidsLimit: opts.pidsLimit ?? 256,
      NetworkMode: spec.network ? (opts.networkMode ?? 'bridge') : 'none',
      AutoRemove: false,
    },
  });

  return {
    name: 'docker',
    sweep,
    async ping() {
      await checkEngine(docker, opts.where ?? 'the docker engine', [opts.image]);
    },
    async start(spec: RunSpec): Promise<AgentHandle> {
      await sweptOnce();
      const { groupDir, mounts } = prepareWorkspace(spec, opts.groupsDir, opts.mountAllow ?? []);
      const container = await docker.createContainer(containerConfig(spec, groupDir, mounts));
      const remove = () => container.remove({ force: true, v: true }).catch(() => undefined);
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
      const handle = handleOf(container, socket, waiting, remove, docker.modem);
      log?.debug({ runId: spec.runId, container: container.id.slice(0, 12) }, 'agent container started');
      return handle;
    },
  };
}

/**
 * An AgentHandle over a container's attach stream. `endLine`, when given, is how end of input is said:
 * written as a last line instead of half-closing the stream (a swarm task's stdin never sees EOF).
 */
export function handleOf(
  container: Docker.Container,
  socket: Duplex,
  waiting: Promise<{ StatusCode?: number }>,
  remove: () => Promise<unknown>,
  modem: Docker['modem'],
  endLine?: string,
): AgentHandle {
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
    let code: number | null = null;
    try {
      const res = await waiting;
      code = typeof res.StatusCode === 'number' ? res.StatusCode : null;
    } catch {
      code = null;
    }
    stdinOpen = false;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([streamDone, new Promise((r) => (timer = setTimeout(r, DRAIN_MS)))]);
    clearTimeout(timer);
    socket.destroy();
    stdout.end();
    await remove();
    return { code, signal: killed ? 'SIGKILL' : null, stderrTail: stderr.toString() };
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
