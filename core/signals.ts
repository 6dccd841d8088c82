/**
 * Who wakes whom, as typed signals. The wiring (gated/app.ts) makes one `Signals` before any stage and
 * passes it down: the stage that made work fires a signal, the stage that does the work listens to it. So
 * no stage calls another's `wake()` and nothing calls back up into the wiring; a stage made later (delivery
 * only exists once the channels have started) simply starts listening then.
 */

import { coerceError } from './errors.js';
import { detached } from './trace.js';
import type { SessionKey } from './types.js';

/** A chat's agent started or stopped working (the chat shows typing meanwhile). */
export interface WorkingChange {
  chatJid: string;
  on: boolean;
}

/**
 * The newest text of a turn an agent is still writing (a `partial: true` block), for the chat's draft;
 * never stored as a reply.
 */
export interface PartialText {
  runId: number;
  key: SessionKey;
  chatJid: string;
  /** The turn it drafts: its `turn`, else the oldest unanswered turn. */
  turn: number;
  /** Its result with internal sections removed; never empty. */
  text: string;
}

/**
 * Turns `from`..`to` of a run ended without a reply of their own (an interrupted turn with no text, a
 * stopped or failed run): the chat's draft of them must end, never left showing.
 */
export interface DraftsEnd {
  runId: number;
  chatJid: string;
  from: number;
  to: number;
}

/** One kind of event that wakes a stage. Listeners run synchronously, in order; one that throws is logged. */
export class Signal<T = void> {
  private readonly listeners: Array<(value: T) => void> = [];

  constructor(
    /** The signal's name in log lines. */
    readonly name: string,
    private readonly onError: (name: string, err: unknown) => void,
  ) {}

  /** Listens from now on; returns the function that stops listening. */
  on(listener: (value: T) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /**
   * Tells every listener. Never throws: the stage that fired has already committed its work. A listener
   * does its own stage's work, so it runs outside the trace of the one that fired (core/trace.ts).
   */
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      try {
        detached(() => listener(value));
      } catch (err) {
        this.onError(this.name, err);
      }
    }
  }
}

/** The wake signals of one gated process, one per kind of new work. */
export interface Signals {
  /**
   * Inbound rows were stored or came back (an in-process adapter, a transcript written, a withheld row
   * released, or another process's commit): the poll loop looks.
   */
  inbound: Signal;
  /**
   * Rows entered a session's lane (released by the gate, a task fired, a workflow step started, a parked
   * row retried): the queue looks.
   */
  queued: Signal;
  /**
   * A message with files not fetched yet was routed to a group (or an `/approve` or an operator may have let
   * a withheld one in): the inbox fetches them. A message without files never wakes the inbox.
   */
  files: Signal;
  /** A row that came with audio awaits its transcript (docs/VOICE.md): the transcriber looks. */
  transcribe: Signal;
  /** A message's attachments are all fetched (or given up): its row may go to the agent now (the queue looks). */
  attached: Signal;
  /** Outbound rows were written (the id when one row is meant): delivery looks. */
  outbound: Signal<number | undefined>;
  /** An agent's turn in progress: the chat's draft shows it. */
  partial: Signal<PartialText>;
  /** Turns ended without a reply: the chat's draft of them is removed. */
  draftsEnd: Signal<DraftsEnd>;
  /** A chat's agent started or stopped working: the chat shows typing. */
  working: Signal<WorkingChange>;
  /**
   * The poll loop left inbound rows for its next step (true: it yields the event loop between slices of
   * a large backlog) or has caught up (false). While it drains, more rows of the same sessions may come:
   * the scheduler starts new runs less often meanwhile, so that batches stay whole.
   */
  backlog: Signal<boolean>;
  /**
   * A tool approval was decided in this process (a chat's `/approve` or `/reject` once its batch committed,
   * the dashboard), or another process committed (the commit watcher): the tool approvals' checker looks.
   */
  decided: Signal;
  /**
   * A workflow run was started or resumed in this process (a `/workflow` whose batch committed), or another
   * process committed (the commit watcher): the workflow engine looks.
   */
  workflows: Signal;
  /**
   * A task was added, paused or resumed in this process (an agent's `schedule`, the dashboard), or another
   * process committed (the commit watcher): the task worker looks for its next due time.
   */
  tasks: Signal;
}

/** Where a listener that threw is reported: gated's logger (a line that names the signal). */
export interface ListenerErrors {
  error(fields: { signal: string; err: string }, msg: string): void;
}

/** Makes the signals of one process; a listener that throws is reported to `log` (none: dropped). */
export function createSignals(log?: ListenerErrors): Signals {
  const onError = (signal: string, err: unknown): void =>
    log?.error({ signal, err: coerceError(err).message }, 'a wake listener failed');
  return {
    inbound: new Signal('inbound', onError),
    queued: new Signal('queued', onError),
    files: new Signal('files', onError),
    attached: new Signal('attached', onError),
    transcribe: new Signal('transcribe', onError),
    outbound: new Signal<number | undefined>('outbound', onError),
    partial: new Signal<PartialText>('partial', onError),
    draftsEnd: new Signal<DraftsEnd>('draftsEnd', onError),
    working: new Signal<WorkingChange>('working', onError),
    backlog: new Signal<boolean>('backlog', onError),
    decided: new Signal('decided', onError),
    tasks: new Signal('tasks', onError),
    workflows: new Signal('workflows', onError),
  };
}
