import type { Readable } from 'node:stream';

/**
 * The seam between the queue and whatever runs agents. Every runtime (`process`, `docker`, `swarm`)
 * implements it and passes one shared conformance suite (test/queue/runtime-conformance.ts).
 */

/** An extra host path a group asks to have in its container (registered_groups.mounts). */
export interface MountRequest {
  /** Absolute host path; must resolve inside an operator allow-listed root. */
  path: string;
  /** Absolute path in the container; default `/mnt/<basename of path>`. */
  target?: string;
  /** Read-write only when asked for; read-only by default. */
  rw?: boolean;
}

/** What a runtime needs to start one agent run. */
export interface RunSpec {
  /** session_log.id of the run (labels, logs). */
  runId: number;
  /** The group's folder path (`krons/content`). */
  group: string;
  topic: string;
  /** Absolute host path of the group's folder: the agent's working directory. Created when missing. */
  groupDir: string;
  /**
   * The topic's git worktree, when the group is bound to a repository (docs/WORKTREES.md): then it, not
   * the group's folder, is the agent's working directory.
   */
  work?: WorkTree;
  /** The group's own image (registered_groups.image), else the runtime's default. Docker only. */
  image?: string | null;
  /**
   * The network the group's containers join (registered_groups.network: `bridge`, a user-defined network,
   * `host`); null or absent: none. Container runtimes only.
   */
  network?: string | null;
  /** Extra mounts asked for by the group, validated against the allow-list. Docker only. */
  mounts?: MountRequest[];
  /**
   * The group's configuration folders (docs/AGENTS.md): host folder → container path, always mounted
   * read-only by container runtimes. The process runtime mounts nothing: the agent gets host paths.
   */
  config?: ConfigMount[];
  /** The command of the group's agent profile (process runtime), instead of the runtime's default. */
  command?: string | null;
  /**
   * Aborted when the run gives up on this start (its hard timeout passed first): a runtime that can stops
   * the start and kills what it started; one that cannot may resolve later (the run kills that handle).
   */
  signal?: AbortSignal;
}

/** A topic's worktree as a runtime needs it. */
export interface WorkTree {
  /** The worktree's folder: the agent's working directory. */
  dir: string;
  /** The operator's folder of the group's worktrees (`dir` is a direct child of it). */
  root: string;
  /** The repository's common git folder (objects, refs). */
  gitDir: string;
  /** The worktree's own git folder (`<gitDir>/worktrees/<name>`: HEAD, index). */
  adminDir: string;
  branch: string;
}

/** A configuration folder a container sees read-only. */
export interface ConfigMount {
  /** Absolute host path (checked again when mounted: it must not be a link). */
  source: string;
  /** Absolute path in the container, under CONFIG_ROOT. */
  target: string;
}

/** How an agent ended. */
export interface AgentExit {
  /** Exit status, or null when a signal ended it (process runtime). */
  code: number | null;
  signal: string | null;
  /** The last few KiB of stderr, for session_log and logs. */
  stderrTail: string;
  /**
   * Set when the runtime lost sight of the agent because its engine stopped answering (container
   * runtimes): why, in one line. The agent's real end is unknown; the run is retried once the engine is back.
   */
  engineLost?: string;
}

/** One running agent. */
export interface AgentHandle {
  /** The agent's stdout; ends when the agent has exited and all output was read. */
  readonly stdout: Readable;
  /**
   * Writes one line to stdin. False when stdin can no longer take it (closed by us, or the agent is gone):
   * the caller then keeps the message for a later run.
   */
  write(line: string): boolean;
  /** True until closeStdin() or the agent's exit: a write may still reach the agent. */
  readonly stdinOpen: boolean;
  /** End of stdin: the agent is expected to finish and exit. Idempotent. */
  closeStdin(): void;
  /** Ends the agent now (SIGKILL to its process group / container). Idempotent. */
  kill(): void;
  /** Resolves once the agent has exited and its stdout and stderr are drained. Never rejects. */
  readonly exited: Promise<AgentExit>;
}

/** Starts agents. */
export interface Runtime {
  readonly name: string;
  /**
   * Starts an agent; rejects when it cannot be started (no image, engine down, bad mount). An engine that
   * cannot be reached at all rejects with EngineError('unreachable') (runtime/engine.ts).
   */
  start(spec: RunSpec): Promise<AgentHandle>;
  /** Resolves when the runtime can start agents (engine reachable); rejects saying why not. */
  ping(): Promise<void>;
  /** Releases what the runtime holds (connections). Does not touch running agents. */
  close?(): Promise<void>;
  /**
   * Prepares in the background what the first run would otherwise wait for (the process runtime's spawner
   * and PID namespace probe). gated calls it a moment after it serves, so that the first answers after a
   * start do not wait on forks; a run before it prepares them itself.
   */
  warm?(): void;
}

/** Bytes of stderr kept for the tail. */
export const STDERR_TAIL_BYTES = 8192;

/** Keeps the last `max` bytes written to it: stderr tails in bounded memory. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private bytes = 0;
  constructor(private readonly max: number = STDERR_TAIL_BYTES) {}

  /** Appends a chunk, dropping the oldest bytes beyond the limit. */
  push(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.chunks.push(buf);
    this.bytes += buf.length;
    while (this.bytes - (this.chunks[0]?.length ?? 0) >= this.max && this.chunks.length > 1) {
      this.bytes -= this.chunks.shift()!.length;
    }
  }

  /** The tail as text (a cut multi-byte character at the start is replaced, never thrown on). */
  toString(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.max)).toString('utf8');
  }
}
