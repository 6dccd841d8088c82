import type { Logger } from '../../core/log.js';
import type { RunSpec } from './types.js';

/**
 * What the two container runtimes (docker.ts: one container per run; swarm.ts: one service per run) share:
 * the options of an agent's container and its lockdown limits, written once, and the labels that mark a
 * run's container or service as this gated's.
 */

/** The label key that marks gated's containers and services. */
export const INSTANCE_LABEL = 'gated.instance';

/** Options of both container runtimes. Limits default to a modest agent: 1 GiB, one CPU, 256 pids, 64 MiB /tmp. */
export interface ContainerOptions {
  /** Image of groups without their own (GATED_AGENT_IMAGE). */
  image: string;
  /** This gated's id: every container or service carries the label `gated.instance=<id>`. */
  instanceId: string;
  /** GATED_GROUPS_DIR: a group's folder must resolve inside it. */
  groupsDir: string;
  /** Host roots that groups may mount from (GATED_MOUNT_ALLOW). */
  mountAllow?: readonly string[];
  memoryBytes?: number;
  nanoCpus?: number;
  pidsLimit?: number;
  /** Size of the tmpfs at /tmp in bytes (the root filesystem is read-only). */
  tmpfsBytes?: number;
  /** uid:gid of the agent; default the owner of the group's folder, or 1000:1000 when root owns it. */
  user?: string;
  /** How the engine is named in errors (`tcp://host:2376 (mutual TLS)`). */
  where?: string;
  log?: Logger;
  /** How often leftovers of dead runs are looked for, in ms (default 60 s; 0: never, tests). */
  sweepEveryMs?: number;
}

/** The limits of one agent's container, defaults resolved. */
export interface Limits {
  memoryBytes: number;
  nanoCpus: number;
  pidsLimit: number;
  tmpfsBytes: number;
}

/** The limits the options name, with the defaults for those they do not. */
export function limitsOf(opts: ContainerOptions): Limits {
  return {
    memoryBytes: opts.memoryBytes ?? 1024 * 1024 * 1024,
    nanoCpus: opts.nanoCpus ?? 1_000_000_000,
    pidsLimit: opts.pidsLimit ?? 256,
    tmpfsBytes: opts.tmpfsBytes ?? 64 * 1024 * 1024,
  };
}

/** The labels of one run's container or service: whose it is, and which run. */
export function runLabels(instanceId: string, spec: RunSpec): Record<string, string> {
  return {
    [INSTANCE_LABEL]: instanceId,
    'gated.group': spec.group,
    'gated.topic': spec.topic,
    'gated.run': String(spec.runId),
  };
}

/**
 * Runs `sweep` every `ms` (not at all for 0) without keeping the process alive; a failure is logged and the
 * next period tries again. Returns the function that stops it.
 */
export function sweepEvery(
  ms: number,
  sweep: () => Promise<unknown>,
  onError: (err: Error) => void,
): () => void {
  if (ms <= 0) return () => {};
  const timer = setInterval(() => {
    sweep().catch((err: unknown) => onError(err as Error));
  }, ms);
  timer.unref();
  return () => clearInterval(timer);
}
