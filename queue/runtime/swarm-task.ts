import type Docker from 'dockerode';

/**
 * Finding a swarm run's container as soon as it runs. The swarm reports a task's state late: the node's
 * agent sends its status to the manager in batches, so a task shows `running` in the task list a good while
 * after its container started (docs/SCALING.md has the measured phases). The engine of the node announces
 * the container at once on its event stream, so the runtime listens there (filtered by the run's labels)
 * and reads the task list only as the slower truth: the node the task went to, a task that ended without a
 * container (rejected, no such image), and an event missed between the stream's answer and its
 * subscription.
 */

/** What the task list says of a run's task. */
export interface TaskView {
  ID: string;
  NodeID?: string;
  Status?: { State?: string; Err?: string; ContainerStatus?: { ContainerID?: string; ExitCode?: number } };
}

/** The container of a run once it started (or already ended), and the node that runs it. */
export interface StartedTask {
  containerId: string;
  nodeId: string | undefined;
}

const TERMINAL = new Set(['complete', 'failed', 'shutdown', 'rejected', 'orphaned', 'remove']);

// The task list is read this often while the node's events are listened to (they are what is fast); and
// this often before the task has a node (the scheduler assigns it within milliseconds).
const TASK_POLL_MS = 250;
const NODE_POLL_MS = 10;

// A swarm labels the containers of its tasks with the node that runs them.
const NODE_LABEL = 'com.docker.swarm.node.id';

/** Events of a run's container on one engine, as a wake-up: the latest start (or end) seen, if any. */
export class ContainerEvents {
  started: StartedTask | undefined;
  private wake: (() => void) | undefined;

  private constructor(private readonly stream: NodeJS.ReadableStream & { destroy(): void }) {
    let buffered = '';
    stream.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) if (line.trim()) this.take(line);
    });
    // A stream that fails leaves the task list to tell; it is closed by its owner either way.
    stream.on('error', () => undefined);
  }

  /** Listens on `engine` for the start (or end) of the container that carries every label of `labels`. */
  static async open(engine: Docker, labels: Record<string, string>): Promise<ContainerEvents> {
    const stream = (await engine.getEvents({
      filters: {
        type: ['container'],
        event: ['start', 'die'],
        label: Object.entries(labels).map(([k, v]) => `${k}=${v}`),
      },
    })) as NodeJS.ReadableStream & { destroy(): void };
    return new ContainerEvents(stream);
  }

  private take(line: string): void {
    const e = JSON.parse(line) as {
      id?: string;
      Actor?: { ID?: string; Attributes?: Record<string, string> };
    };
    const containerId = e.Actor?.ID ?? e.id;
    if (!containerId || this.started) return;
    this.started = { containerId, nodeId: e.Actor?.Attributes?.[NODE_LABEL] };
    this.wake?.();
  }

  /** Resolves at once when the start was seen, else at the next event or after `ms`. */
  next(ms: number): Promise<void> {
    if (this.started) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  close(): void {
    this.wake = undefined;
    this.stream.destroy();
  }
}

/** The first task of a service, from the task list. */
async function firstTask(docker: Docker, serviceId: string): Promise<TaskView | undefined> {
  const tasks = (await docker.listTasks({ filters: { service: [serviceId] } })) as TaskView[];
  return tasks[0];
}

/** What the task list says: started (running with its container), ended without running, or not yet. */
function fromTask(task: TaskView | undefined): StartedTask | Error | undefined {
  const state = task?.Status?.State ?? '';
  const containerId = task?.Status?.ContainerStatus?.ContainerID;
  if (state === 'running' && containerId) return { containerId, nodeId: task?.NodeID };
  if (TERMINAL.has(state))
    return new Error(`swarm task ended before it ran: ${state} ${task?.Status?.Err ?? ''}`.trim());
  return undefined;
}

function notStarted(serviceId: string, task: TaskView | undefined): Error {
  const state = task?.Status?.State ?? '';
  return new Error(`swarm task of service ${serviceId.slice(0, 12)} did not start (${state || 'no task'})`);
}

/** Polls the task list until the scheduler has given the task a node (or it ended, or time is up). */
export async function nodeOf(docker: Docker, serviceId: string, deadline: number): Promise<string> {
  for (;;) {
    const task = await firstTask(docker, serviceId);
    const seen = fromTask(task);
    if (seen instanceof Error) throw seen;
    if (task?.NodeID) return task.NodeID;
    if (Date.now() > deadline) throw notStarted(serviceId, task);
    await new Promise((r) => setTimeout(r, NODE_POLL_MS));
  }
}

/**
 * Waits until the run's container has started: at the node engine's event for it, else when the task list
 * shows it running. Rejects when the task ended without running, or at `deadline`. The list is first read
 * one period after the call: a task that was just scheduled has no container yet.
 */
export async function startedTask(
  docker: Docker,
  serviceId: string,
  events: ContainerEvents,
  deadline: number,
): Promise<StartedTask> {
  for (;;) {
    await events.next(TASK_POLL_MS);
    if (events.started) return events.started;
    const task = await firstTask(docker, serviceId);
    if (events.started) return events.started;
    const seen = fromTask(task);
    if (seen instanceof Error) throw seen;
    if (seen) return seen;
    if (Date.now() > deadline) throw notStarted(serviceId, task);
  }
}
