import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { PACKAGE_ROOT } from '../../core/paths.js';
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
}

type Child = ChildProcessByStdio<Writable, Readable, Readable>;

// How long output may still arrive after the agent's exit before its pipes are closed from our side.
const DRAIN_MS = 2000;

/** The minimal environment of an agent: enough to find programs and the example agent, nothing secret. */
function agentEnv(extra: Record<string, string> | undefined): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: process.env.LANG ?? 'C.UTF-8',
    GATED_HOME: PACKAGE_ROOT,
    ...extra,
  };
}

/** Sends a signal to the agent's whole process group; a group that is already gone is fine. */
function signalGroup(child: Child, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group has no process left
  }
}

/** The environment variable that marks every process of one run, inherited by all it starts. */
export const RUN_MARK_VAR = 'GATED_RUN_MARK';

/**
 * Kills every process that still carries this run's mark in its environment (Linux /proc; elsewhere only
 * the process group is reached). This catches what the process group cannot: a child that called
 * `setsid` (a new session and group) or double-forked to get away from the run. Returns how many it
 * signalled.
 */
export function sweepMarked(mark: string): number {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return 0;
  }
  const needle = Buffer.from(`${RUN_MARK_VAR}=${mark}\0`);
  let killed = 0;
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${pid}/environ`).includes(needle)) continue;
      process.kill(Number(pid), 'SIGKILL');
      killed += 1;
    } catch {
      // gone already, or another user's process we cannot read
    }
  }
  return killed;
}

function handleOf(child: Child, mark: string): AgentHandle {
  const stderr = new TailBuffer();
  let stdinOpen = true;
  let exitInfo: { code: number | null; signal: string | null } | undefined;

  // A write to an agent that just died raises EPIPE on the stream; it must not crash the gateway, and it
  // means stdin is gone.
  child.stdin.on('error', () => {
    stdinOpen = false;
  });
  child.stdin.on('close', () => {
    stdinOpen = false;
  });
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));

  const exited = new Promise<AgentExit>((resolve) => {
    let drain: NodeJS.Timeout | undefined;
    child.once('exit', (code, signal) => {
      stdinOpen = false;
      exitInfo = { code, signal };
      // The agent is over: children it left behind would hold its pipes open and outlive the run.
      signalGroup(child, 'SIGKILL');
      sweepMarked(mark);
      // A child that left the process group (setsid) can still hold the pipes: stop waiting for them.
      drain = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, DRAIN_MS);
    });
    child.once('close', (code, signal) => {
      clearTimeout(drain);
      const info = exitInfo ?? { code, signal };
      resolve({ code: info.code, signal: info.signal, stderrTail: stderr.toString() });
    });
  });

  return {
    stdout: child.stdout,
    get stdinOpen() {
      return stdinOpen && child.stdin.writable;
    },
    write(line) {
      if (!stdinOpen || !child.stdin.writable) return false;
      child.stdin.write(line);
      return true;
    },
    closeStdin() {
      if (!stdinOpen) return;
      stdinOpen = false;
      child.stdin.end();
    },
    kill() {
      stdinOpen = false;
      signalGroup(child, 'SIGKILL');
      sweepMarked(mark);
    },
    exited,
  };
}

/**
 * The process runtime: each run is `sh -c "$GATED_AGENT_CMD"` in the group's folder, in its own process
 * group (detached) so that a kill reaches every child it started; at the run's end the group is killed and
 * every process still carrying the run's mark (an environment variable all its descendants inherit, even
 * after `setsid`) is swept. It is a runtime for trusted local agents: they run as gated's user with its
 * file access, and an agent that clears its environment and detaches on purpose can still escape the
 * sweep. Untrusted agents belong in the docker runtime (docs/QUEUE.md).
 */
export function createProcessRuntime(opts: ProcessRuntimeOptions): Runtime {
  return {
    name: 'process',
    async start(spec: RunSpec): Promise<AgentHandle> {
      mkdirSync(spec.groupDir, { recursive: true });
      const mark = `${spec.runId}-${randomBytes(8).toString('hex')}`;
      const child = spawn('sh', ['-c', opts.cmd], {
        cwd: spec.groupDir,
        env: { ...agentEnv(opts.env), [RUN_MARK_VAR]: mark },
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
      return handleOf(child, mark);
    },
    async ping() {
      // sh is always there on a machine that runs gated; nothing to reach.
    },
  };
}
