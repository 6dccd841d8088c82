import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { mkdirSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../../core/log.js';
import { PACKAGE_ROOT } from '../../core/paths.js';
import { checkGroupDirSync } from '../../core/group-dir.js';
import { dirname, join } from 'node:path';
import { agentUserOf, dropPrefix, openPathFor, type AgentUser } from './agent-user.js';
import { AGENT_HOME_DIR, agentHome } from './home.js';
import { RUN_MARK_VAR, runMark, sweepMarked } from './run-mark.js';
import { killGroup, sharedSpawner, type SpawnedExit, type Spawned, type SpawnRequest } from './spawner.js';
import { TailBuffer, type AgentExit, type AgentHandle, type Runtime, type RunSpec } from './types.js';

/** Options of the process runtime. */
export interface ProcessRuntimeOptions {
  /** The shell command of an agent (GATED_AGENT_CMD), run with `sh -c` in the group's folder. */
  cmd: string;
  /**
   * Extra, non-secret environment for the agent. The gateway's own environment is never passed on: tokens
   * live there. Secrets reach the agent on stdin only.
   */
  env?: Record<string, string>;
  /** false: no PID namespace even where one could be had (the group and the sweep only). Default true. */
  pidNamespace?: boolean;
  /**
   * false: gated spawns each agent itself (each spawn forks gated, at a cost that grows with its heap).
   * Default: through the spawner (queue/runtime/spawner.ts), or itself when no spawner can be started.
   */
  spawner?: boolean;
  /** The spawner's script; default the one shipped (tests point it elsewhere). */
  spawnerFile?: string;
  /** Where a spawner that cannot start or dies is reported. */
  log?: Logger;
  /**
   * GATED_PROCESS_USER: who agents run as under a root gated (`uid:gid`, or `root`); default an
   * unprivileged uid of their own (queue/runtime/agent-user.ts). Ignored when gated is not root.
   */
  user?: string;
  /** The groups folder (GATED_GROUPS_DIR), made searchable for the agent user; default each run's parent. */
  groupsDir?: string;
}

type Child = ChildProcessByStdio<Writable, Readable, Readable>;

// How long output may still arrive after the agent's exit before its pipes are closed from our side.
const DRAIN_MS = 2000;

/**
 * The minimal environment of an agent: enough to find programs and the example agent, nothing secret. No
 * HOME of the operator's: a run gets its own (`agentHome`).
 */
function agentEnv(extra: Record<string, string> | undefined): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: process.env.LANG ?? 'C.UTF-8',
    GATED_HOME: PACKAGE_ROOT,
    ...extra,
  };
}

/**
 * How a run gets a PID namespace of its own, tried in this order: directly (root, or CAP_SYS_ADMIN), then
 * inside a user namespace that maps gated's user to itself (an unprivileged user where the kernel allows
 * it). The agent's shell is the namespace's init: when it exits or is killed, the kernel kills every process
 * left in the namespace, whatever session, group or environment it gave itself (`env -i setsid …`), and
 * `--kill-child` ends it when `unshare` itself is killed. `--mount-proc` gives the namespace a /proc of its
 * own (in a private mount namespace): tools that look their children up by pid (the Codex CLI waits on a
 * command's /proc entry) must see the namespace's pids, not the machine's.
 */
const NAMESPACE_PREFIXES: readonly (readonly string[])[] = [
  ['unshare', '--pid', '--fork', '--kill-child', '--mount-proc'],
  ['unshare', '--user', '--map-current-user', '--pid', '--fork', '--kill-child', '--mount-proc'],
];

/**
 * The first process of a run's namespace: a shell that runs the agent's command as its child and exits
 * with its status. The agent is then no namespace init (which the kernel spares signals it has no handler
 * for), and its death by a signal reaches gated as the shell's `128 + n` (`unshare` itself reports a
 * child killed by a signal as a plain failure). `; exit` keeps the shell from exec'ing the command.
 */
const NAMESPACE_INIT = 'sh -c "$1"; exit $?';

/**
 * The argv of a run: the agent's command in a shell, in the namespace's init where there is one. `shared`:
 * the shell first puts its stdout on its stdin (`exec 1>&0`; stdin is a socket, both ways), so that the
 * spawner hands gated one socket for both (SpawnRequest.stdoutOnStdin); what the agent reads and writes
 * is the same.
 */
function argvOf(prefix: readonly string[], drop: readonly string[], cmd: string, shared: boolean): string[] {
  const dup = shared ? 'exec 1>&0\n' : '';
  return prefix.length === 0
    ? [...drop, 'sh', '-c', `${dup}${cmd}`]
    : [...prefix, ...drop, 'sh', '-c', `${dup}${NAMESPACE_INIT}`, 'gated-run', cmd];
}

const SIGNAL_NAMES = new Map(Object.entries(osConstants.signals).map(([name, n]) => [n, name]));

/** The agent's end as the namespace's shell tells it: `128 + n` is death by signal n. */
function fromInit(
  code: number | null,
  signal: string | null,
): { code: number | null; signal: string | null } {
  const name = code !== null && code > 128 ? SIGNAL_NAMES.get(code - 128) : undefined;
  return name === undefined ? { code, signal } : { code: null, signal: name };
}

let namespacePrefix: Promise<readonly string[]> | undefined;

/**
 * The command prefix that starts a run in a PID namespace of its own, or none where this machine allows
 * none (a container without the capability, a kernel without user namespaces): then the process group and
 * the mark sweep are all there is. Probed once per process.
 */
export function pidNamespacePrefix(): Promise<readonly string[]> {
  namespacePrefix ??= (async () => {
    for (const prefix of NAMESPACE_PREFIXES) if (await runsTrue(prefix)) return prefix;
    return [];
  })();
  return namespacePrefix;
}

/** True when `prefix true` exits 0 here. */
export function runsTrue(prefix: readonly string[]): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(prefix[0]!, [...prefix.slice(1), 'true'], {
      stdio: 'ignore',
      env: agentEnv(undefined),
    });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

/**
 * Starts the agent from gated itself: the way without a spawner (each spawn forks gated). At its exit, as
 * the spawner does, its group is killed and its mark swept (here off the event loop, in libuv's pool).
 */
async function spawnDirect(req: SpawnRequest): Promise<Spawned> {
  if (req.home !== undefined) agentHome(req.cwd, req.owner);
  const child: Child = spawn(req.bin, req.args, {
    cwd: req.cwd,
    env: req.env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  const stderr = new TailBuffer();
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const exit = new Promise<SpawnedExit>((resolve) => {
    child.once('exit', (code, signal) => {
      const at = Date.now();
      // The agent is over: what it left behind would hold its pipes open and outlive the run.
      killGroup(child.pid!);
      if (req.markVar !== undefined) void sweepMarked(req.env[req.markVar]!);
      const report = () =>
        resolve({ code, signal, stderrTail: stderr.toString(), waitedMs: Date.now() - at });
      if (child.stderr.closed) return report();
      const drain = setTimeout(() => child.stderr.destroy(), req.drainMs);
      child.stderr.once('close', () => {
        clearTimeout(drain);
        report();
      });
    });
  });
  return { pid: child.pid!, stdin: child.stdin as Socket, stdout: child.stdout as Socket, exit };
}

function handleOf(agent: Spawned, namespaced: boolean): AgentHandle {
  const { stdin, stdout } = agent;
  let stdinOpen = true;

  // A write to an agent that just died raises EPIPE on the stream; it must not crash the gateway, and it
  // means stdin is gone. The spawner's stdin is a whole socket: its read side ends when the agent's does.
  stdin.on('error', () => {
    stdinOpen = false;
  });
  stdin.on('close', () => {
    stdinOpen = false;
  });
  // A socket of its own: read only to hear its end. One socket for both is read as stdout, by the run.
  if (stdin !== stdout && stdin.readable) stdin.resume();

  const stdoutClosed = new Promise<void>((resolve) => {
    if (stdout.closed) resolve();
    else stdout.once('close', () => resolve());
  });
  const exited = agent.exit.then(async (end) => {
    stdinOpen = false;
    const info = namespaced ? fromInit(end.code, end.signal) : { code: end.code, signal: end.signal };
    // A child that left the process group (setsid) can still hold stdout: stop waiting for it. Mostly it
    // closed before the exit was reported, and no timer is armed.
    if (!stdout.closed) {
      const drain = setTimeout(() => stdout.destroy(), Math.max(0, DRAIN_MS - end.waitedMs));
      await stdoutClosed;
      clearTimeout(drain);
    }
    return { code: info.code, signal: info.signal, stderrTail: end.stderrTail } satisfies AgentExit;
  });

  return {
    stdout,
    get stdinOpen() {
      return stdinOpen && stdin.writable;
    },
    write(line) {
      if (!stdinOpen || !stdin.writable) return false;
      stdin.write(line);
      return true;
    },
    closeStdin() {
      if (!stdinOpen) return;
      stdinOpen = false;
      stdin.end();
    },
    kill() {
      stdinOpen = false;
      // The group's leader dies with it; its exit sweeps what left the group.
      killGroup(agent.pid);
    },
    exited,
  };
}

/**
 * The process runtime: each run is `sh -c "$GATED_AGENT_CMD"` in the group's folder, in a PID namespace of
 * its own where the machine allows one (`pidNamespacePrefix`: nothing it starts outlives it, even a child
 * that cleared its environment and called `setsid`), and in its own process group (detached) so that a kill
 * reaches every child it started; at the run's end the group is killed and, only where no namespace can
 * be had, every process still carrying the run's mark (an environment variable all its descendants
 * inherit, even after `setsid`) is swept through /proc. Under a root gated the agent runs as a user of its
 * own without capabilities (agent-user.ts); otherwise as gated's user with its file access. It is a runtime
 * for trusted local agents: untrusted agents belong in the docker runtime (docs/QUEUE.md).
 */
export function createProcessRuntime(opts: ProcessRuntimeOptions): Runtime {
  // Under a root gated, agents run as a user of their own (throws at once for a bad setting).
  const user = agentUserOf(opts.user, process.getuid?.());
  // Read once: every process.env lookup is a getenv call, and the base is the same for every run.
  const baseEnv = agentEnv(opts.env);
  let dropping: Promise<readonly string[]> | undefined;
  return {
    name: 'process',
    async start(spec: RunSpec): Promise<AgentHandle> {
      const mark = runMark(spec.runId);
      const prefix = opts.pidNamespace === false ? [] : await pidNamespacePrefix();
      dropping ??= user
        ? dropTo(user, opts.groupsDir ?? dirname(spec.groupDir), opts.log)
        : Promise.resolve([]);
      const drop = await dropping;
      const cmd = spec.command ?? opts.cmd;
      // The working directory is the group's own folder, made when missing and refused when a link is at
      // its name (core/group-dir.ts): never a path another group's agent could have redirected.
      // A topic's worktree, when the group is bound to a repository (docs/WORKTREES.md), is checked alike.
      const cwd = checkGroupDirSync(spec.work?.dir ?? spec.groupDir);
      // HOME is made (or checked) by whoever starts the agent, just before it starts (SpawnRequest.home).
      const home = join(cwd, AGENT_HOME_DIR);
      const env = { ...baseEnv, HOME: home, [RUN_MARK_VAR]: mark };
      const request = (shared: boolean): SpawnRequest => {
        const [bin, ...args] = argvOf(prefix, drop, cmd, shared);
        const req: SpawnRequest = { bin: bin!, args, cwd, env, drainMs: DRAIN_MS, home };
        if (user) req.owner = user;
        // In a PID namespace nothing of the run outlives its first process: no pass over /proc is needed.
        if (prefix.length === 0) req.markVar = RUN_MARK_VAR;
        return shared ? { ...req, stdoutOnStdin: true } : req;
      };
      return handleOf(await startAgent(opts, request, spec.signal), prefix.length > 0);
    },
    warm() {
      // Both asked for before the first run, so that it waits on neither (nor forks a big gated later).
      if (opts.pidNamespace !== false) void pidNamespacePrefix();
      if (opts.spawner !== false) void sharedSpawner(opts.log, opts.spawnerFile);
    },
    async ping() {
      // sh is always there on a machine that runs gated; nothing to reach.
    },
  };
}

/**
 * What starts an agent as `user` (agent-user.ts), checked once: setpriv must be there, and the groups folder
 * and gated's own folder (the bundled agents) reachable by that user. A machine without setpriv fails every
 * run with a message naming the ways out, never starts the agent as root.
 */
async function dropTo(
  user: AgentUser,
  groupsDir: string,
  log: Logger | undefined,
): Promise<readonly string[]> {
  const drop = dropPrefix(user);
  if (!(await runsTrue(drop)))
    throw new Error(
      `gated runs as root and cannot start agents as ${user.uid}:${user.gid} (setpriv from util-linux is ` +
        'needed): install it, use GATED_RUNTIME=docker, or set GATED_PROCESS_USER=root to run agents as root',
    );
  openPathFor(PACKAGE_ROOT, user, log);
  mkdirSync(groupsDir, { recursive: true });
  openPathFor(groupsDir, user, log);
  return drop;
}

/**
 * Starts the agent through the spawner (its stdin and stdout one socket), or from gated itself where there
 * is none (two pipes, as `spawn` makes them).
 */
async function startAgent(
  opts: ProcessRuntimeOptions,
  request: (shared: boolean) => SpawnRequest,
  signal: AbortSignal | undefined,
): Promise<Spawned> {
  if (opts.spawner === false) return spawnDirect(request(false));
  for (let attempt = 1; ; attempt++) {
    const spawner = await sharedSpawner(opts.log, opts.spawnerFile);
    if (spawner === null) return spawnDirect(request(false));
    try {
      return await spawner.start(request(true), signal);
    } catch (err) {
      // A spawner that died meanwhile is started again, once; a failed spawn (ENOENT…) is the run's.
      if (spawner.alive || attempt > 1 || signal?.aborted) throw err;
    }
  }
}
