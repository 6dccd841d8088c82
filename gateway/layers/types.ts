import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { Message, SessionKey } from '../../core/types.js';
import type { Resolution } from '../../router/index.js';
import type { Db } from '../../store/db.js';
import type { Catalog } from '../../store/routes.js';
import type { StickyStore } from '../../store/state.js';
import type { AccessGate } from '../access.js';

/** What the gateway's commands need from the queue (queue/ implements it; wakes go through signals). */
export interface QueueControl {
  /** /stop: stops the lane's run for this chat; false when nothing ran. */
  stop(key: SessionKey, chatJid?: string): Promise<boolean>;
  /** /interrupt: asks the chat's agent to stop the turn in progress; false when none was working. */
  interrupt(key: SessionKey, chatJid: string): boolean;
  /** /new: the session row is gone; a running agent is asked to finish. */
  resetSession(key: SessionKey): void;
  /** Facts about one lane for /ping. */
  facts(key: SessionKey): { running: boolean; waiting: number; backoffUntil: number | null };
  /** Instance-wide numbers for /status. */
  snapshot(): { active: unknown[]; waiting: unknown[] };
}

/** One inbound message on its way through the steps (not a draft: drafts are turns in progress). */
export interface Passage {
  readonly msg: Message;
  /** The content the agent will see (a prefix layer may strip its prefix). */
  content: string;
  /** Group chosen by a layer before routing (sticky or prefix), if any. */
  group: string | undefined;
  /** Topic chosen by a layer (sticky or prefix), if any. */
  topic: string | undefined;
  /** An /interrupt's text: it interrupts its session's turn in progress and goes at once (docs/PROTOCOL.md). */
  interrupts?: boolean;
  /**
   * The routes table's answer for this message, resolved at most once per message (null: no route
   * matches; undefined: not asked yet). Set only by `routeOf` in route.ts.
   */
  resolution?: Resolution | null;
}

/** Everything a layer may read or do while a poll batch is processed (inside its transaction). */
export interface LayerEnv {
  db: Db;
  config: Pick<Config, 'admins'> & Partial<Pick<Config, 'configDir'>>;
  log: Logger;
  catalog: Catalog;
  /** The chats' sticky state (read once per chat and batch; gateway/batch.ts). */
  sticky: Pick<StickyStore, 'get' | 'setGroup' | 'setTopic'>;
  queue: QueueControl;
  now: number;
  /** Writes an outbound gateway answer to the message's chat (an outbox row, in the batch transaction). */
  answer(msg: Message, text: string): void;
  /** Marks the message handled by the gateway itself. */
  finish(msg: Message, state: 'command' | 'done' | 'dropped' | 'unrouted', error?: string): void;
  /** Runs once the batch is committed (side effects outside the database, such as stopping an agent). */
  afterCommit(fn: () => void | Promise<void>): void;
  /** A `/approve` or `/reject` may have decided a tool approval: its run hears it once the batch committed. */
  decided(): void;
  /** A `/workflow` started, resumed or cancelled a run: the workflow engine looks once the batch committed. */
  workflow(): void;
  /** This gateway's own bot username on the chat's platform (learned at start), when known. */
  botName(chatJid: string): string | undefined;
  /** The group this chat belongs to when no layer says otherwise: sticky, its own folder, or its route. */
  chatGroup(passage: Passage): string | undefined;
  /**
   * The session topic of the message in `group`: the topic a layer chose (sticky, prefix), else its
   * platform thread, unless the group keeps threads as replies (registered_groups.threads): then ''.
   */
  sessionTopic(passage: Passage, group: string): string;
  /** Access rules and pairing codes (/approve, /reject; docs/ACCESS.md). */
  access: AccessGate;
}

/** A layer either handles the message (it goes no further) or passes it on, possibly changed. */
export type Layer = (passage: Passage, env: LayerEnv) => 'handled' | 'next';
