import { formatTarget, weightOf } from '../router/index.js';
import type { Db } from '../store/db.js';
import { awaitTranscript } from '../store/transcriptions.js';
import type { AccessGate } from './access.js';
import type { BatchWork, Placement } from './batch.js';
import { expandChatCommand } from './layers/chat-commands.js';
import { commandLayer } from './layers/commands.js';
import { prefixLayer } from './layers/prefix.js';
import { routeLayer, type RoutingDecision } from './layers/route.js';
import { stickyLayer } from './layers/sticky.js';
import type { Passage, LayerEnv } from './layers/types.js';
import type { GatewayMetrics } from './metrics-hooks.js';

/** What processing one poll batch changed, so the loop knows whom to wake after the commit. */
export interface BatchOutcome {
  released: number;
  outbound: number;
  daemon: number;
  /** `/approve` or `/reject` decided codes: the tool approvals' checker looks once the batch committed. */
  decided: number;
  /** Routed rows that wait for files, or let in by an `/approve` (the inbox is woken). */
  files?: number;
  /** `/workflow` started, resumed or cancelled runs: the workflow engine looks once the batch committed. */
  workflows?: number;
  effects: Array<() => void | Promise<void>>;
  /** Rows that now wait for their transcripts (the transcriber is woken). */
  transcribing?: number;
}

/**
 * The row writes of the steps, one named statement each, prepared once per pipeline. A row held for the gate
 * is written after the rows, with the others of its batch (gateway/batch.ts).
 */
export class StepWrites {
  /** Routed to a group and withheld by access (with its reason). */
  readonly hold;
  /** Ended by the gateway itself: unrouted, a built-in target, a failed row. */
  readonly end;
  /** Routed to a daemon: the daemon dispatcher sends it. */
  readonly daemon;
  /** Whether a row came with files (a caption-less photo is not an empty message). */
  readonly hasFiles;

  constructor(db: Db) {
    this.hold = db.prepare(
      `UPDATE messages SET state = @state, group_folder = @group, session_topic = @topic, agent_content = @content,
         target = @target, route_id = @route_id, weight = @weight, threshold = @threshold,
         max_hold_ms = @max_hold_ms, held_at = @held_at, error = @error, interrupts = @interrupts,
         counted = @counted
       WHERE id = @id`,
    );
    this.end = db.prepare(
      'UPDATE messages SET state = @state, target = @target, route_id = @route_id, error = @error WHERE id = @id',
    );
    this.daemon = db.prepare(
      `UPDATE messages SET state = 'daemon', target = @target, route_id = @route_id, agent_content = @content WHERE id = @id`,
    );
    this.hasFiles = db.prepare('SELECT 1 FROM attachments WHERE message_id = ? LIMIT 1').pluck();
  }
}

/** One row on its way through the steps, inside the batch transaction. */
export interface RowWork {
  passage: Passage;
  env: LayerEnv;
  now: number;
  writes: StepWrites;
  access: AccessGate;
  metrics: GatewayMetrics | undefined;
  /** GATED_CONFIG_DIR: a group's own chat commands are expanded from its files (undefined: none). */
  configDir: string | undefined;
  /** Transcription is on (docs/VOICE.md): rows with audio wait for their transcripts. */
  transcribe: boolean;
  out: BatchOutcome;
  /** Chats with a row held in this batch: the gate looks at each after the rows. */
  touched: Set<string>;
  /** The batch's deferred writes and the row's savepoint (gateway/batch.ts). */
  batch: BatchWork;
  /** The routing decision, set by the route step for the steps after it (null: not routed to a group). */
  decision?: RoutingDecision & { folder: string };
}

/** One step of an inbound row's way. 'handled' ends the way for this row (its state is written). */
export interface Step {
  name: string;
  /** What the step does, in one line (docs/ARCHITECTURE.md prints the list). */
  does: string;
  run(row: RowWork): 'handled' | 'next';
  /**
   * Whether the step has anything to do with this row at all, checked before it runs (absent: always). A
   * step that does not apply is skipped without a trace span, so a message without audio pays nothing for
   * the transcribe step.
   */
  applies?(row: RowWork): boolean;
}

/**
 * The steps of every inbound row, in order. The pipeline iterates this list; the docs print it. After the
 * rows of a batch, the gate looks at each chat that got a held row and releases its rows into their lanes
 * when their weight reaches the threshold (docs/ROUTING.md).
 */
export const STEPS: readonly Step[] = [
  {
    name: 'transcribe',
    does: 'a message that came with audio waits for its transcript, then goes on with it as its text (docs/VOICE.md)',
    applies: (r) => r.transcribe && r.passage.msg.audio === 1,
    run: transcribe,
  },
  {
    name: 'sticky',
    does: 'a message that is only `@group` or `#topic` makes the chat stick to it (a bare `@` or `#` resets)',
    run: (r) => stickyLayer(r.passage, r.env),
  },
  {
    name: 'command',
    does: 'gateway commands (`/new`, `/ping`, `/stop`, `/status`, `/approve`, …) are answered here',
    run: (r) => (spoken(r) ? 'next' : commandLayer(r.passage, r.env)),
  },
  {
    name: 'prefix',
    does: 'a leading `@group ` or `#topic ` sends this one message there (stripped from what the agent reads)',
    run: (r) => (spoken(r) ? 'next' : prefixLayer(r.passage, r.env)),
  },
  {
    name: 'route',
    does: "the routes table picks the target: a group (a chat command of the group's own expands here), a daemon or a built-in",
    run: route,
  },
  {
    name: 'access',
    does: "the group's access rules serve the sender, or withhold the row (pending, limited, denied)",
    run: access,
  },
  {
    name: 'gate',
    does: 'the row is held with its weight; the impulse gate releases a chat once its weight is reached',
    run: hold,
  },
];

/**
 * A row that went through transcription: its text is what a recogniser heard (or a note of ours), so it is
 * never a command and never addresses another group by prefix; the sticky layer lets it follow the chat's
 * state without changing it (docs/VOICE.md).
 */
function spoken(r: RowWork): boolean {
  const t = r.passage.msg.transcript;
  return t !== null && t !== undefined;
}

/**
 * A row that came with audio, while transcription is on, waits for its transcript (store/transcriptions.ts)
 * unless its chat reaches no group (nothing would hear it). Its group is the one its chat's messages go to
 * now, whose voice.json names the language. It comes back through the steps once transcribed.
 */
function transcribe(r: RowWork): 'handled' | 'next' {
  const { passage } = r;
  const { msg } = passage;
  if (spoken(r)) return 'next';
  const group = r.env.sticky.get(msg.chat_jid).group ?? r.env.chatGroup(passage);
  if (group === undefined || group === null || !r.env.catalog.groups.has(group)) return 'next';
  r.batch.guard();
  awaitTranscript(r.env.db, msg.id, group);
  r.out.transcribing = (r.out.transcribing ?? 0) + 1;
  return 'handled';
}

function route(r: RowWork): 'handled' | 'next' {
  const { passage, writes } = r;
  const { msg } = passage;
  const decision = routeLayer(passage, r.env);
  // Counted in memory and written once per batch (route_hits), when the row goes through.
  if (decision.routeId !== undefined) r.batch.hit(decision.routeId);
  const { target } = decision;
  const route_id = decision.routeId ?? null;
  if (!target) {
    writes.end.run({ id: msg.id, state: 'unrouted', target: null, route_id, error: null });
    r.metrics?.unrouted();
    return 'handled';
  }
  const targetText = formatTarget(target);
  r.metrics?.routed(targetText);
  switch (target.kind) {
    case 'folder':
      if (!r.env.catalog.groups.has(target.folder)) {
        const error = `group '${target.folder}' is not registered`;
        r.env.log.warn(
          { msgId: msg.id, chat: msg.chat_jid, group: target.folder },
          'message not dispatched: group not registered',
        );
        writes.end.run({ id: msg.id, state: 'unrouted', target: targetText, route_id, error });
        return 'handled';
      }
      r.decision = { ...decision, folder: target.folder };
      expandCommand(r, target.folder);
      return 'next';
    case 'builtin': {
      const ping = target.name === 'ping';
      if (ping) r.env.answer(msg, 'pong');
      const state = ping ? 'done' : 'dropped';
      writes.end.run({ id: msg.id, state, target: targetText, route_id, error: null });
      return 'handled';
    }
    case 'daemon':
      writes.daemon.run({ id: msg.id, target: targetText, route_id, content: changed(passage) });
      r.out.daemon += 1;
      return 'handled';
  }
}

/** A chat command from the group's files (not a gateway command: the command step took those). */
function expandCommand(r: RowWork, folder: string): void {
  const { passage } = r;
  if (r.configDir === undefined || passage.msg.verb !== 'message' || !passage.content.startsWith('/')) return;
  if (spoken(r)) return;
  passage.content = expandChatCommand(r.configDir, folder, passage.content, r.env.log) ?? passage.content;
}

function access(r: RowWork): 'handled' | 'next' {
  const { msg } = r.passage;
  const folder = r.decision!.folder;
  // Issuing a code, a limit's notice and counting the sender's rows write, or read what the batch wrote.
  if (!r.access.quiet(msg, folder)) r.batch.guard();
  const verdict = r.access.decide(msg, folder, r.now);
  if (verdict.state === 'serve') return 'next';
  // Withheld rows keep their routing, so an approval or a release can put them in the gate as is.
  if (verdict.notice) r.env.answer(msg, verdict.notice);
  writeHold(r, verdict.state, verdict.reason);
  return 'handled';
}

function hold(r: RowWork): 'handled' {
  r.batch.hold(r.passage.msg, placement(r, 'held', null));
  r.touched.add(r.passage.msg.chat_jid);
  return 'handled';
}

function writeHold(r: RowWork, state: string, error: string | null): void {
  r.writes.hold.run(placement(r, state, error));
}

/** The gate's columns of a row routed to a group: its session, target, weight and threshold. */
function placement(r: RowWork, state: string, error: string | null): Placement {
  const { passage, now } = r;
  const { msg } = passage;
  const d = r.decision!;
  return {
    id: msg.id,
    state,
    error,
    held_at: state === 'held' ? now : null,
    group: d.folder,
    topic: r.env.sessionTopic(passage, d.folder),
    content: changed(passage),
    target: formatTarget({ kind: 'folder', folder: d.folder }),
    route_id: d.routeId ?? null,
    // An /interrupt is meant for now: it fills the gate at once.
    weight: passage.interrupts ? d.impulse.threshold : weightOf(d.impulse, msg.verb),
    interrupts: passage.interrupts ? 1 : null,
    counted: r.access.countsSenders(msg, d.folder) ? 1 : null,
    threshold: d.impulse.threshold,
    max_hold_ms: d.impulse.maxHoldMs,
  };
}

/** Only a changed text is kept apart (agent_content); the stored content stays as the user wrote it. */
function changed(passage: Passage): string | null {
  return passage.content === passage.msg.content ? null : passage.content;
}
