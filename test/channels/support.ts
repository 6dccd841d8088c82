/** Helpers shared by the channel tests: a recording sink, row readers, cleanups, e2e configuration. */
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { loadConfig, type Config } from '../../core/config.js';
import type { DeliveryError } from '../../core/errors.js';
import type { NewInbound } from '../../core/types.js';
import type { Channel, InboundSink, SendPart } from '../../channels/channel.js';
import { openDatabase, type Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';

/** A sink that stores with the real insertInbound and lets a test await its n-th call. */
export interface RecordingSink {
  sink: InboundSink;
  /** Every message the channel handed over, stored or deduplicated. */
  readonly seen: NewInbound[];
  /** Resolves once the sink was called at least `n` times. */
  waitCalls(n: number): Promise<void>;
  /** Resolves once the sink was handed a message that satisfies `pred`. */
  waitSeen(pred: (msg: NewInbound) => boolean): Promise<void>;
}

/** Makes a RecordingSink writing into `db`. */
export function recordingSink(db: Db): RecordingSink {
  const seen: NewInbound[] = [];
  const waiters: Array<() => void> = [];
  return {
    seen,
    sink: (msg) => {
      const id = insertInbound(db, msg);
      seen.push(msg);
      for (const w of waiters.splice(0)) w();
      return id;
    },
    async waitCalls(n) {
      while (seen.length < n) await new Promise<void>((resolve) => waiters.push(resolve));
    },
    async waitSeen(pred) {
      while (!seen.some(pred)) await new Promise<void>((resolve) => waiters.push(resolve));
    },
  };
}

/** An inbound row as the conformance and channel tests compare it. */
export interface InboundRow {
  chat_jid: string;
  sender: string;
  sender_name: string | null;
  verb: string;
  topic: string;
  platform_msg_id: string | null;
  reply_to: string | null;
  content: string;
}

/** The inbound rows of a database, oldest first. */
export function inboundRows(db: Db): InboundRow[] {
  return db
    .prepare(
      `SELECT chat_jid, sender, sender_name, verb, topic, platform_msg_id, reply_to, content
       FROM messages WHERE is_from_me = 0 ORDER BY id`,
    )
    .all() as InboundRow[];
}

/**
 * Registers an afterEach that runs the deferred cleanups in reverse order (delivery before its channel,
 * the channel before its server). Returns `defer`, which adds one.
 */
export function cleanupAfterEach(): (fn: () => Promise<unknown>) => void {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });
  return (fn) => cleanups.push(fn);
}

/** One part to hand to a channel's send in a test. */
export function testPart(chatJid: string, extra: Partial<SendPart> = {}): SendPart {
  return {
    messageId: 1,
    chatJid,
    text: 'x',
    part: 0,
    parts: 1,
    replyTo: null,
    topic: '',
    previousPartId: null,
    ...extra,
  };
}

/** The DeliveryError a send rejects with, or undefined when it was accepted. */
export function sendFailure(channel: Channel, part: SendPart): Promise<DeliveryError | undefined> {
  return channel.send(part).then(
    () => undefined,
    (e: unknown) => e as DeliveryError,
  );
}

/** The groups and routes an end-to-end test's database has before gated starts. */
export interface E2eSeed {
  groups: Array<[folder: string, name: string]>;
  routes: Array<[seq: number, match: string, target: string]>;
}

/** The settings of an end-to-end gateway: fast poll, process runtime with the example agent, short idle. */
export const E2E_ENV = { GATED_POLL_MS: '50', GATED_RUNTIME: 'process', GATED_IDLE_TIMEOUT_MS: '300' };

/** Stores the groups and routes of `seed`. */
export function seedGroups(db: Db, groupsDir: string, seed: E2eSeed): void {
  for (const [folder, name] of seed.groups) addGroup(db, groupsDir, folder, name);
  const route = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
  for (const r of seed.routes) route.run(...r);
}

/**
 * A whole-gateway configuration for end-to-end tests in `dir` (E2E_ENV) plus the platform settings in
 * `env`, with groups and routes already stored (tests that restart gated on the same folder).
 */
export function e2eConfig(dir: string, env: Record<string, string>, seed: E2eSeed): Config {
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    ...E2E_ENV,
    ...env,
  });
  const db = openDatabase(config.db);
  seedGroups(db, config.groupsDir, seed);
  db.close();
  return config;
}
