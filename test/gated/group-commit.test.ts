import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { Channel, InboundSink, SendPart } from '../../channels/channel.js';
import { EXIT_COMMIT_FAILED } from '../../gated/base.js';
import { openDatabase } from '../../store/db.js';
import { groupCommitOf } from '../../store/group-commit.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';
import { exited, gatedEnv, gatedRun, stderrOf, until } from '../helpers/process.js';

/**
 * A platform that, at each send, reads the reply's row through a connection of its own, as another process
 * would: a send of a row that is not committed yet (still in the turn's group) is what a crash would turn
 * into a reply sent twice.
 */
class CheckingChannel implements Channel {
  readonly platform = 'gc';
  readonly limit = 4096;
  readonly limitUnit = 'chars' as const;
  readonly sent: Array<{ id: number; row: string; answered: string }> = [];
  private reader: Database.Database | undefined;

  constructor(private readonly path: string) {}

  async start(_sink: InboundSink): Promise<void> {
    this.reader = new Database(this.path, { readonly: true });
  }
  async stop(): Promise<void> {
    this.reader?.close();
  }

  async send(part: SendPart): Promise<string | null> {
    const row = this.reader!.prepare(
      `SELECT r.delivery AS row, coalesce(m.state, '?') AS answered
       FROM messages r LEFT JOIN messages m ON m.id = r.reply_to_id WHERE r.id = ?`,
    ).get(part.messageId) as { row: string; answered: string } | undefined;
    this.sent.push({ id: part.messageId, row: row?.row ?? 'not committed', answered: row?.answered ?? '?' });
    return `gc-${part.messageId}-${part.part}`;
  }
}

const readers: Database.Database[] = [];
afterEach(() => {
  for (const r of readers.splice(0)) r.close();
});

describe('group commit in a whole gated', () => {
  it('groups the writes of busy chats, sends only committed replies, and answers every message once', async () => {
    const dir = tempDir();
    const path = join(dir, 'gated.db');
    const channel = new CheckingChannel(path);
    const g = await startTestGated({
      channels: [channel],
      env: { GATED_DB: path, GATED_IDLE_TIMEOUT_MS: '200', GATED_MAX_CONCURRENT: '4' },
      seed: (db, config) => {
        for (let i = 0; i < 4; i++) {
          addGroup(db, config.groupsDir, `gc${i}`);
          db.prepare(`INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)`).run(
            i,
            `room=${i}`,
            `gc${i}`,
          );
        }
      },
    });
    const group = groupCommitOf(g.db);
    expect(group).toBeDefined();
    const reader = new Database(g.config.db, { readonly: true });
    readers.push(reader);
    const ids: number[] = [];
    // A turn with a group open, as when a channel stores a row in the turn an agent answered in.
    group!.join();
    expect(group!.isOpen).toBe(true);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 4; i++) {
        const id = g.gateway.sink({ chat_jid: `gc:${i}`, sender: 'u', content: `m${round}-${i}` })!;
        // Stored through the sink: committed before the channel may tell its platform it took the event.
        expect(reader.prepare('SELECT id FROM messages WHERE id = ?').pluck().get(id)).toBe(id);
        ids.push(id);
      }
    }
    const states = () =>
      reader
        .prepare(`SELECT state FROM messages WHERE id IN (${ids.join(',')})`)
        .pluck()
        .all() as string[];
    await until(() => states().every((s) => s === 'done'), 30_000, 'every message answered');
    await until(
      () =>
        reader
          .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery <> 'sent'`)
          .pluck()
          .get() === 0,
      10_000,
      'every reply delivered',
    );
    const replies = reader
      .prepare(`SELECT id, content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
      .all() as Array<{ id: number; content: string }>;
    // Each message is echoed in exactly one reply (the example agent answers a batch in one block).
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 4; i++) {
        const text = `echo: m${round}-${i}`;
        expect(
          replies.filter((r) => r.content.split('\n').includes(text)),
          text,
        ).toHaveLength(1);
      }
    }
    // Every part the platform got was of a row already committed, pending, answering a row already done.
    expect(channel.sent.length).toBe(replies.length);
    expect(channel.sent.filter((s) => s.row !== 'pending' || s.answered !== 'done')).toEqual([]);
    expect(group!.commits).toBeGreaterThan(0);
  }, 60_000);

  it('GATED_GROUP_COMMIT=0 runs without it', async () => {
    const g = await startTestGated({ channels: [], env: { GATED_GROUP_COMMIT: '0' } });
    expect(groupCommitOf(g.db)).toBeUndefined();
  });

  it('a COMMIT that fails makes gated exit, its turn rolled back, for the restart to redo', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir);
    const seed = openDatabase(env.GATED_DB);
    addGroup(seed, env.GATED_GROUPS_DIR, 'g1');
    // A row whose polling writes a part the COMMIT refuses (a foreign key checked at COMMIT only), as a
    // full disk or an I/O error refuses a COMMIT: each statement succeeds, the group's COMMIT fails.
    seed.exec(`CREATE TABLE poison (m INTEGER REFERENCES messages(id) DEFERRABLE INITIALLY DEFERRED);
               CREATE TRIGGER poison AFTER UPDATE OF state ON messages WHEN NEW.content = 'poison'
               BEGIN INSERT INTO poison VALUES (-1); END`);
    seed.close();
    const child = gatedRun(env);
    await until(() => stderrOf(child).includes('web chat at'), 20_000, 'gated up');
    const db = openDatabase(env.GATED_DB);
    readers.push(db);
    const id = insertInbound(db, { chat_jid: 'web:g1', sender: 'u', content: 'poison' })!;
    expect(await exited(child)).toBe(EXIT_COMMIT_FAILED);
    expect(stderrOf(child)).toMatch(/a group commit failed \(FOREIGN KEY constraint failed\); exiting/);
    // Nothing of the turn stayed: the row is not polled, the cursor did not move.
    expect(db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id)).toBeNull();
    expect(
      db.prepare(`SELECT value FROM router_state WHERE key = 'poll_cursor'`).pluck().get() ?? '0',
    ).not.toBe(String(id));
  }, 40_000);
});
