import type { Readable, Writable } from 'node:stream';
import type { Config } from '../core/config.js';
import { UsageError } from '../core/errors.js';
import { createLogger } from '../core/log.js';
import { isValidFolder } from '../core/types.js';
import { LocalChannel } from '../channels/local/index.js';
import { createDelivery } from '../delivery/delivery.js';
import { withActor } from '../store/audit.js';
import { openDatabase, type Db } from '../store/db.js';
import { addGroup, getGroup, listGroups } from '../store/groups.js';
import { inboundSinkOf } from '../store/messages.js';
import { startGated } from './app.js';
import { liveOwner } from '../store/owner.js';

/** Rows of the chat still on their way: inbound not yet answered, replies not yet printed. */
function inFlight(db: Db, jid: string): number {
  return db
    .prepare(
      `SELECT count(*) FROM messages WHERE chat_jid = ? AND (
         (is_from_me = 0 AND (state IS NULL OR state IN ('held', 'ready', 'running'))) OR
         (is_from_me = 1 AND delivery = 'pending'))`,
    )
    .pluck()
    .get(jid) as number;
}

/** Resolves when `input` ends (Ctrl-D, or the end of piped text). */
function ended(input: Readable): Promise<void> {
  return new Promise((resolve) => {
    if (input.readableEnded) resolve();
    else input.once('end', resolve).once('close', resolve);
  });
}

/** Waits until the chat has nothing in flight, or `ms` passed. */
async function drained(db: Db, jid: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (inFlight(db, jid) > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
}

/**
 * `gated chat [FOLDER]`: a terminal chat with one group on the `local:` platform. When a `gated run` owns
 * the database, lines go in as rows it picks up on its next poll and this process only prints the replies
 * of its own chat; otherwise a whole gated runs in this process (no HTTP, no platform channels). When the
 * input ends, it waits for the answers still on their way, then exits.
 */
export async function runChat(
  config: Config,
  folder: string,
  input: Readable,
  output: Writable,
): Promise<number> {
  if (!isValidFolder(folder)) throw new UsageError(`bad group folder '${folder}'`);
  const log = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, false);
  const db = openDatabase(config.db);
  if (!getGroup(db, folder)) {
    if (folder === 'demo' && listGroups(db).length === 0)
      withActor(db, 'gated', () => addGroup(db, config.groupsDir, 'demo', 'Demo'));
    else {
      db.close();
      throw new UsageError(`no group '${folder}': add it with 'gated groups add ${folder}'`);
    }
  }
  const local = new LocalChannel({ folder, input, output });
  const owner = liveOwner(db);
  if (owner) {
    output.write(`gated chat: ${local.jid} through the running gated (pid ${owner.pid}); Ctrl-D to quit\n`);
    // A session is (group, topic), not a chat: every chat that reaches the group shares the agent's memory.
    output.write(
      `gated chat: this terminal shares group ${folder}'s main session with its web chat (web:${folder}) ` +
        `and every chat routed to ${folder}: the agent sees all of them\n`,
    );
    const delivery = createDelivery({
      db,
      channels: [local],
      log,
      only: [local.jid],
      pollMs: 200,
    });
    await local.start(inboundSinkOf(db));
    delivery.start();
    await ended(input);
    await drained(db, local.jid, config.runTimeoutMs);
    await local.stop();
    await delivery.stop();
    db.close();
    return 0;
  }
  db.close();
  output.write(`gated chat: ${local.jid} (gated runs in this terminal); Ctrl-D to quit\n`);
  const gated = await startGated({ config, log, channels: [local], http: false });
  await ended(input);
  await drained(gated.db, local.jid, config.runTimeoutMs);
  await gated.close(2000);
  return 0;
}
