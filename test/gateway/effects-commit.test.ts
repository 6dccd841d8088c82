/**
 * A command's side effects (gateway/layers/types.ts `afterCommit`: /stop stopping an agent, /new resetting
 * a session) run once the batch that took the command is committed. With group commit the batch's rows
 * commit at the end of the event-loop turn, after the poll step: an effect must not act on a row that
 * another connection cannot see yet, or that a crash could still take back.
 */
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { createSignals } from '../../core/signals.js';
import { silentLogger } from '../../core/log.js';
import { createGateway } from '../../gateway/gateway.js';
import { groupCommitOf } from '../../store/group-commit.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { freshDb, tempDir, throwingGroupCommit } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { RecordingQueue } from '../helpers/gateway.js';

it("a bare /stop's effect runs after the batch's group COMMIT: another connection sees the command row", async () => {
  const { db, path } = freshDb();
  const group = throwingGroupCommit(db);
  addGroup(db, tempDir(), 'g');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, '', 'g')`).run();
  const other = new Database(path, { readonly: true });
  const seen: Array<{ open: boolean; state: unknown }> = [];
  const command = insertInbound(db, { chat_jid: 'discord:1', sender: 'u', content: '/stop' })!;
  class Watching extends RecordingQueue {
    override async stop(): Promise<boolean> {
      seen.push({
        open: groupCommitOf(db)!.isOpen,
        state: other.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(command),
      });
      return false;
    }
  }
  const gateway = createGateway({
    db,
    config: { pollMs: 3_600_000, admins: [] },
    log: silentLogger(),
    queue: new Watching(),
    signals: createSignals(),
  });
  try {
    gateway.loop.tick();
    // The poll batch joined the turn's group: nothing of it is committed yet.
    expect(group.isOpen).toBe(true);
    await until(() => seen.length === 1, 5000, 'the /stop effect');
    expect(seen[0]).toEqual({ open: false, state: 'command' });
  } finally {
    await gateway.stop();
    other.close();
  }
});
