import type { SessionKey } from '../../core/types.js';
import { silentLogger } from '../../core/log.js';
import { createSignals } from '../../core/signals.js';
import { createGateway, type Gateway } from '../../gateway/gateway.js';
import type { QueueControl } from '../../gateway/layers/types.js';
import type { Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from './db.js';

/**
 * Stands in for the queue in gateway tests: the gateway's contract ends at "rows are ready and the queue was
 * woken", which these tests read from the database; it records the calls the layers make.
 */
export class RecordingQueue implements QueueControl {
  wakes = 0;
  stops: Array<{ key: SessionKey; chatJid?: string }> = [];
  resets: SessionKey[] = [];
  interrupts: Array<{ key: SessionKey; chatJid: string }> = [];
  running = new Set<string>();
  wake(): void {
    this.wakes += 1;
  }
  async stop(key: SessionKey, chatJid?: string): Promise<boolean> {
    this.stops.push({ key, ...(chatJid ? { chatJid } : {}) });
    return this.running.delete(`${key.group}#${key.topic}`);
  }
  interrupt(key: SessionKey, chatJid: string): boolean {
    this.interrupts.push({ key, chatJid });
    return this.running.has(`${key.group}#${key.topic}`);
  }
  resetSession(key: SessionKey): void {
    this.resets.push(key);
  }
  facts(key: SessionKey) {
    return { running: this.running.has(`${key.group}#${key.topic}`), waiting: 0, backoffUntil: null };
  }
  snapshot() {
    return { active: [...this.running], waiting: [] };
  }
}

/** A gateway on `db` with a recording queue, groups registered, polling every 2 s. */
export function testGateway(
  db: Db,
  opts: {
    groups?: string[];
    admins?: string[];
    pollMs?: number;
    batchSize?: number;
    sliceMs?: number;
    daemonRetry?: { baseDelayMs: number; maxDelayMs: number };
  } = {},
) {
  const groupsDir = tempDir();
  for (const g of opts.groups ?? []) addGroup(db, groupsDir, g);
  const queue = new RecordingQueue();
  // The gateway's contract ends at "the queue was woken": the queued signal, which the queue listens to.
  const signals = createSignals();
  signals.queued.on(() => queue.wake());
  const gateway: Gateway = createGateway({
    db,
    config: { pollMs: opts.pollMs ?? 2000, admins: opts.admins ?? [] },
    log: silentLogger(),
    queue,
    signals,
    loop: {
      ...(opts.batchSize ? { batchSize: opts.batchSize } : {}),
      ...(opts.sliceMs !== undefined ? { sliceMs: opts.sliceMs } : {}),
    },
    ...(opts.daemonRetry ? { daemonRetry: opts.daemonRetry } : {}),
  });
  return { gateway, queue, groupsDir, signals };
}

/** Pipeline facts of one message row. */
export function row(db: Db, id: number) {
  return db
    .prepare(
      `SELECT id, state, group_folder, session_topic, content, target, route_id, error, weight FROM messages WHERE id = ?`,
    )
    .get(id) as {
    id: number;
    state: string | null;
    group_folder: string | null;
    session_topic: string | null;
    content: string;
    target: string | null;
    route_id: number | null;
    error: string | null;
    weight: number | null;
  };
}

/** The outbound rows written to a chat, oldest first. */
export function answers(db: Db, chatJid: string): string[] {
  return db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
    .pluck()
    .all(chatJid) as string[];
}

/** Inserts the example routes of docs/ROUTING.md (routes.example.sql). */
export function loadExampleRoutes(db: Db): void {
  const ins = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
  ins.run(0, 'room=-5075870332', 'krons/content');
  ins.run(10, 'platform=telegram verb=mention', 'rhias/mentions');
  ins.run(20, 'verb=follow', 'krons/notifs');
  ins.run(30, 'platform=bluesky', 'bsky/feed');
  ins.run(99, '', 'default/firehose');
}

export const EXAMPLE_GROUPS = [
  'krons',
  'krons/content',
  'rhias/mentions',
  'krons/notifs',
  'bsky/feed',
  'default/firehose',
];
