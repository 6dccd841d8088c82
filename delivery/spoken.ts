import { realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { coerceError } from '../core/errors.js';
import { readGroupConfig } from '../core/group-config.js';
import { groupDirOf } from '../core/group-dir.js';
import type { Logger } from '../core/log.js';
import { platformRow } from '../core/platforms.js';
import { writeInFolder } from '../core/safe-file.js';
import type { Channel } from '../channels/channel.js';
import type { Db } from '../store/db.js';
import { speakable, type Speaker } from '../voice/speech.js';
import type { OutboxRow } from './outbox.js';

/** What spoken replies need; gated/voice.ts makes the real parts. */
export interface SpokenOptions {
  db: Db;
  /** GATED_GROUPS_DIR: the spoken file is written into the answering group's folder. */
  groupsDir: string;
  /** GATED_CONFIG_DIR: a group's voice settings are its voice.json there (core/group-config.ts). */
  configDir: string;
  /** Speaks `text` with `voice` into an Ogg/Opus voice note (voice/speech.ts `Speaker`). */
  speaker: Pick<Speaker, 'speak'>;
  log: Logger;
}

/**
 * Spoken replies (docs/VOICE.md): before the first part of an agent's reply is sent, a group whose
 * voice.json says `"speak": true` gets the reply's text spoken, written into its folder as
 * `outbox/spoken/<row id>.ogg` and recorded as one more file of the row (`outbound_files.spoken`), so it goes
 * out after the text as the platform's row says (`spoken` in core/platforms.ts: a voice note, an audio
 * file, an audio element) and, once recorded, is sent exactly once like every part. A reply that cannot be
 * spoken goes out as text alone.
 */
export class SpokenReplies {
  private readonly groupOf;
  private readonly hasSpoken;
  private readonly nextSeq;
  private readonly insert;

  constructor(private readonly opts: SpokenOptions) {
    const { db } = opts;
    this.groupOf = db
      .prepare(`SELECT q.group_folder FROM messages q WHERE q.id = ? AND q.group_folder IS NOT NULL`)
      .pluck();
    this.hasSpoken = db.prepare(`SELECT 1 FROM outbound_files WHERE message_id = ? AND spoken = 1`).pluck();
    this.nextSeq = db
      .prepare(`SELECT coalesce(max(seq) + 1, 0) FROM outbound_files WHERE message_id = ?`)
      .pluck();
    this.insert = db.prepare(
      `INSERT INTO outbound_files (message_id, seq, path, abs_path, name, mime, state, spoken)
       VALUES (?, ?, ?, ?, 'reply.ogg', 'audio/ogg', 'ok', 1)`,
    );
  }

  /**
   * Adds the spoken file to `row` when its group speaks and `channel` can carry it; never throws. True
   * when it added one.
   */
  async prepare(row: OutboxRow, channel: Channel): Promise<boolean> {
    // Only before the first part: the parts a row has must not change once one was sent.
    if (row.kind !== 'reply' || row.parts_sent > 0 || row.reply_to_id === null) return false;
    if (!channel.sendFile || !platformRow(channel.platform)?.spoken) return false;
    const group = this.groupOf.get(row.reply_to_id) as string | undefined;
    if (group === undefined) return false;
    const v = readGroupConfig(this.opts.configDir, group).voice;
    if (!v.speak || this.hasSpoken.get(row.id) !== undefined) return false;
    const text = speakable(row.content);
    if (text === '') return false;
    const rlog = this.opts.log.child({ row: row.id, group });
    try {
      const started = performance.now();
      const data = await this.opts.speaker.speak(text, v.voice ?? v.language);
      const rel = join('outbox', 'spoken', `${row.id}.ogg`);
      const dir = await realpath(groupDirOf(this.opts.groupsDir, group));
      // The folder is the agent's: a link it planted on the way is refused, never written through.
      await writeInFolder(dir, rel, data);
      this.insert.run(row.id, this.nextSeq.get(row.id), rel, join(dir, rel));
      rlog.debug({ bytes: data.length, ms: Math.round(performance.now() - started) }, 'reply spoken');
      return true;
    } catch (err) {
      rlog.warn({ err: coerceError(err).message }, 'reply not spoken; it goes out as text');
      return false;
    }
  }
}
