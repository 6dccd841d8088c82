/**
 * A real Docker engine for the suites that need one: dockerd (Debian docker.io, installed by
 * scripts/setup.d/20-docker.sh) on its own socket, data root and exec root under a temp folder, with no
 * iptables and no bridge so the host network is never touched (docs/TESTING.md). Images are built offline by
 * docker/build-offline.sh (this machine's node binary imported as a base). Teardown stops dockerd by pid,
 * unmounts what it left mounted (exec/netns/default and any overlay) and removes the folder.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { packageFile } from '../../core/paths.js';

const run = promisify(execFile);

/** What else a test engine listens on or runs with. */
export interface StartDockerdOptions {
  /** Also serve tcp://127.0.0.1:port with mutual TLS (certificates from test/infra/certs.ts). */
  tls?: { port: number; ca: string; cert: string; key: string };
  /** Extra environment of dockerd (e.g. DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 for a swarm). */
  env?: Record<string, string>;
  /**
   * Run dockerd in a network namespace of its own (`unshare --net`): networks it makes (a user-defined
   * bridge) then never reach the host's interfaces. Its socket is a file, so clients reach it all the same;
   * not with `tls` (its port would be inside that namespace).
   */
  ownNetwork?: boolean;
  /** More dockerd flags (e.g. `--debug`, whose log the swarm bench reads for the swarm's own phases). */
  args?: string[];
}

/** A running test engine. */
export interface TestDockerd {
  /** The folder holding the socket, data root, exec root and log. */
  readonly dir: string;
  readonly socketPath: string;
  /** `unix://…`, for DOCKER_HOST. */
  readonly host: string;
  readonly docker: Docker;
  /**
   * Builds an agent image with docker/build-offline.sh; returns the tag. `programs` are programs of this
   * machine the agent runs (GATED_AGENT_PROGRAMS), copied in with their libraries; `settings` are
   * NAME=VALUE lines of the image's environment (GATED_AGENT_ENV).
   */
  buildAgentImage(
    tag: string,
    agentDir?: string,
    agentFile?: string,
    programs?: string[],
    settings?: string[],
  ): Promise<string>;
  /** Stops dockerd and removes everything it left. Idempotent. */
  stop(): Promise<void>;
  /**
   * Stops the engine, keeping its data: SIGTERM as an operator would, or SIGKILL as a crash (then nothing
   * is cleaned up on the way down).
   */
  stopEngine(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** Starts the engine again on the same socket and data, and waits for `_ping`. */
  startEngine(): Promise<void>;
}

function findDockerd(): string {
  for (const p of ['/usr/sbin/dockerd', '/usr/bin/dockerd', '/usr/local/bin/dockerd'])
    if (existsSync(p)) return p;
  throw new Error('dockerd is not installed: run scripts/setup.d/20-docker.sh (Debian docker.io)');
}

function logTail(path: string): string {
  try {
    return readFileSync(path, 'utf8').slice(-3000);
  } catch {
    return '(no log)';
  }
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(pid) && pid > 1 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function killIfAlive(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Mount points at or under `dir`, deepest first, from this process's view of the mount table. */
function mountsUnder(dir: string): string[] {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined && (p === dir || p.startsWith(dir + '/')));
  return points.sort((a, b) => b.length - a.length);
}

async function unmountAll(dir: string): Promise<void> {
  for (let pass = 0; pass < 3; pass++) {
    const points = mountsUnder(dir);
    if (points.length === 0) return;
    for (const p of points) await run('umount', ['-l', p]).catch(() => undefined);
  }
  const left = mountsUnder(dir);
  if (left.length) throw new Error(`dockerd left mounts behind: ${left.join(', ')}`);
}

/** True while `pid` is a live process (a zombie nobody reaps counts as gone). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Kills `pid` and waits (up to `ms`) until it is gone. */
async function killAndWait(pid: number, ms: number): Promise<void> {
  killIfAlive(pid);
  const end = Date.now() + ms;
  while (running(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

/**
 * Processes an engine can leave behind when it dies without cleaning up: the containerd shims serving its
 * socket under `execRoot`, and their children (the containers' processes). SIGKILLed, children first.
 */
async function killStranded(execRoot: string): Promise<void> {
  const sock = join(execRoot, 'containerd', 'containerd.sock');
  const procs = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map((d) => {
      try {
        const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
        const ppid = Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
        return { pid: Number(d), ppid, cmd };
      } catch {
        return undefined;
      }
    })
    .filter((p): p is { pid: number; ppid: number; cmd: string } => p !== undefined);
  const shims = procs.filter((p) => p.cmd.includes('containerd-shim') && p.cmd.includes(sock));
  const shimPids = new Set(shims.map((p) => p.pid));
  for (const p of procs.filter((q) => shimPids.has(q.ppid))) await killAndWait(p.pid, 5000);
  for (const p of shims) await killAndWait(p.pid, 5000);
}

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Starts dockerd and waits for `_ping`. Rejects with dockerd's log tail when it cannot start: a suite that
 * needs the engine then fails saying why.
 */
export async function startDockerd(
  timeoutMs = 60_000,
  extra: StartDockerdOptions = {},
): Promise<TestDockerd> {
  const bin = findDockerd();
  const dir = mkdtempSync(join(tmpdir(), 'gated-dockerd-'));
  const socketPath = join(dir, 'docker.sock');
  const tlsArgs = extra.tls
    ? [
        `--host=tcp://127.0.0.1:${extra.tls.port}`,
        '--tlsverify',
        `--tlscacert=${extra.tls.ca}`,
        `--tlscert=${extra.tls.cert}`,
        `--tlskey=${extra.tls.key}`,
      ]
    : [];
  const logPath = join(dir, 'dockerd.log');
  const launch = (): ChildProcess => {
    const logFd = openSync(logPath, 'a');
    // unshare execs dockerd in place: the child's pid is dockerd's.
    const [cmd, pre] = extra.ownNetwork ? ['unshare', ['--net', '--', bin]] : [bin, []];
    const c = spawn(
      cmd,
      [
        ...pre,
        `--host=unix://${socketPath}`,
        `--data-root=${join(dir, 'data')}`,
        `--exec-root=${join(dir, 'exec')}`,
        `--pidfile=${join(dir, 'dockerd.pid')}`,
        '--iptables=false',
        '--ip6tables=false',
        '--bridge=none',
        '--storage-driver=overlay2',
        ...tlsArgs,
        ...(extra.args ?? []),
      ],
      { stdio: ['ignore', logFd, logFd], env: { ...process.env, ...extra.env } },
    );
    closeSync(logFd);
    return c;
  };
  let child = launch();
  const docker = new Docker({ socketPath });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // dockerd starts its own containerd; a dockerd that had to be killed leaves it running.
      const containerdPid = readPid(join(dir, 'exec', 'containerd', 'containerd.pid'));
      let clean = true;
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        if (!(await waitExit(child, 20_000))) {
          child.kill('SIGKILL');
          await waitExit(child, 5_000);
          clean = false;
        }
      } else clean = false;
      // An engine that was killed (or never stopped cleanly) leaves its containerd, shims and containers.
      if (!clean) {
        if (containerdPid !== undefined) await killAndWait(containerdPid, 5000);
        await killStranded(join(dir, 'exec'));
      }
      await unmountAll(dir);
      rmSync(dir, { recursive: true, force: true });
    })());

  const waitPing = async (): Promise<void> => {
    const started = Date.now();
    let lastErr = 'no answer';
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        const tail = logTail(logPath);
        await stop();
        throw new Error(`dockerd exited during start (${child.exitCode ?? child.signalCode}):\n${tail}`);
      }
      try {
        await docker.ping();
        break;
      } catch (err) {
        lastErr = (err as Error).message;
      }
      if (Date.now() - started > timeoutMs) {
        const tail = logTail(logPath);
        await stop();
        throw new Error(`dockerd did not answer _ping within ${timeoutMs} ms (${lastErr}):\n${tail}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  await waitPing();

  const host = `unix://${socketPath}`;
  return {
    dir,
    socketPath,
    host,
    docker,
    stop,
    async stopEngine(signal = 'SIGTERM') {
      const containerdPid = readPid(join(dir, 'exec', 'containerd', 'containerd.pid'));
      child.kill(signal);
      if (!(await waitExit(child, 30_000))) {
        child.kill('SIGKILL');
        await waitExit(child, 5_000);
      }
      // A crashed engine takes its containerd with it; the shims (and the containers) stay, as after a
      // real crash. The pid file goes too: where nobody reaps the dead containerd (a container's init), its
      // zombie would pass for a live one and the next dockerd would wait for it instead of starting its own.
      if (signal === 'SIGKILL' && containerdPid !== undefined) {
        await killAndWait(containerdPid, 10_000);
        rmSync(join(dir, 'exec', 'containerd', 'containerd.pid'), { force: true });
      }
    },
    async startEngine() {
      child = launch();
      await waitPing();
    },
    async buildAgentImage(tag, agentDir, agentFile, programs, settings) {
      const env: NodeJS.ProcessEnv = { ...process.env, DOCKER_HOST: host };
      if (agentDir) env.GATED_AGENT_DIR = agentDir;
      if (agentFile) env.GATED_AGENT_FILE = agentFile;
      if (programs?.length) env.GATED_AGENT_PROGRAMS = programs.join(' ');
      if (settings?.length) env.GATED_AGENT_ENV = settings.join(' ');
      try {
        await run('bash', [packageFile('docker', 'build-offline.sh'), tag], { env, maxBuffer: 1 << 24 });
      } catch (err) {
        const e = err as Error & { stderr?: string };
        throw new Error(`building ${tag} failed: ${e.message}\n${e.stderr ?? ''}`);
      }
      return tag;
    },
  };
}
