import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { mkdirSync } from 'node:fs';
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

function handleOf(child: Child): AgentHandle {
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
    },
    exited,
  };
}

/**
 * The process runtime: each run is `sh -c "$GATED_AGENT_CMD"` in the group's folder, in its own process
 * group (detached) so that a kill reaches every child it started.
 */
export function createProcessRuntime(opts: ProcessRuntimeOptions): Runtime {
  return {
    name: 'process',
    async start(spec: RunSpec): Promise<AgentHandle> {
      mkdirSync(spec.groupDir, { recursive: true });
      const child = spawn('sh', ['-c', opts.cmd], {
        cwd: spec.groupDir,
        env: agentEnv(opts.env),
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
      return handleOf(child);
    },
    async ping() {
      // sh is always there on a machine that runs gated; nothing to reach.
    },
  };
}
