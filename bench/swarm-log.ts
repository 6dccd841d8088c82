import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Inside the swarm: where a one-shot service's first ~150 ms go, read from the engine's debug log
 * (swarmkit logs each step of a task, with the engine's clock). The log is only on while these runs are
 * measured: debug lines cost the engine time, so the rounds that compare runtimes run without it.
 */

/** The config file of a test engine, by which its debug log is turned on and off (dockerd reloads on SIGHUP). */
export class EngineDebug {
  private readonly dir = mkdtempSync(join(tmpdir(), 'gated-bench-dockerd-conf-'));
  readonly file = join(this.dir, 'daemon.json');

  constructor() {
    writeFileSync(this.file, JSON.stringify({ debug: false }));
  }

  /** The dockerd flag that makes the engine read this file. */
  get args(): string[] {
    return [`--config-file=${this.file}`];
  }

  /** Turns the log on or off in the engine whose pid file is `pidFile`; waits for the reload. */
  async set(on: boolean, pidFile: string): Promise<void> {
    writeFileSync(this.file, JSON.stringify({ debug: on }));
    process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGHUP');
    await new Promise((r) => setTimeout(r, 500));
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A task's steps as swarmkit logs them, in order. */
export const SWARM_STEPS = [
  'allocated (pending)',
  'assigned to a node',
  'received by the node',
  'accepted',
  'preparing',
  'container created (ready)',
  'starting',
  'running',
] as const;

type Step = (typeof SWARM_STEPS)[number];

const BY_TRANSITION: Record<string, Step> = {
  ACCEPTED: 'accepted',
  PREPARING: 'preparing',
  READY: 'container created (ready)',
  STARTING: 'starting',
  RUNNING: 'running',
};

/** The step a debug line records, and of which task; undefined for any other line. */
function stepOf(line: string): { task: string; step: Step; service?: string } | undefined {
  const task = /task\.id=(\w+)/.exec(line)?.[1] ?? /committed allocated task (\w+)/.exec(line)?.[1];
  if (!task) return undefined;
  if (line.includes('committed allocated task')) return { task, step: 'allocated (pending)' };
  if (line.includes('msg="assigning to node')) return { task, step: 'assigned to a node' };
  if (line.includes('msg=assigned ') && line.includes('desiredstate=RUNNING'))
    return { task, step: 'received by the node' };
  const to = /msg="state changed" module=node\/agent\/taskmanager.*state\.transition="\w+->(\w+)"/.exec(line);
  const step = to ? BY_TRANSITION[to[1]!] : undefined;
  return step ? { task, step, service: /service\.id=(\w+)/.exec(line)?.[1] } : undefined;
}

/**
 * Per step, the ms from each service's create (epoch ms, by service id) to the step of its task, read from
 * the engine's debug log.
 */
export function swarmSteps(log: string, created: Map<string, number>): Map<Step, number[]> {
  const tasks = new Map<string, { service?: string; at: Map<Step, number> }>();
  for (const line of log.split('\n')) {
    const seen = stepOf(line);
    const time = /^time="([^"]+)"/.exec(line)?.[1];
    if (!seen || !time) continue;
    const task = tasks.get(seen.task) ?? { at: new Map<Step, number>() };
    task.service ??= seen.service;
    // Nanoseconds in the log; Date takes milliseconds.
    if (!task.at.has(seen.step)) task.at.set(seen.step, Date.parse(time.slice(0, 23) + 'Z'));
    tasks.set(seen.task, task);
  }
  const steps = new Map<Step, number[]>();
  for (const { service, at } of tasks.values()) {
    const t0 = service ? created.get(service) : undefined;
    if (t0 === undefined) continue;
    for (const [step, t] of at) steps.set(step, [...(steps.get(step) ?? []), t - t0]);
  }
  return steps;
}
