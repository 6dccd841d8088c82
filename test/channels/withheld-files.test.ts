/**
 * Files of senders access withholds (docs/SECURITY.md): the inbox downloader leaves the attachments of
 * `denied`, `pending` and `limited` messages where the platform keeps them (here the web chat's staged
 * uploads) and saves them into the group's folder only once the message is served; a released message
 * waits for its files again, as a new one does. Real SQLite, the real web channel and inbox.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createInbox } from '../../channels/inbox.js';
import { WebChannel } from '../../channels/web/index.js';
import { silentLogger } from '../../core/log.js';
import { ATTACHMENT_WAIT_MS } from '../../store/attachments.js';
import { releaseLimited } from '../../store/approvals.js';
import { insertInbound } from '../../store/messages.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';

describe('files of withheld senders', () => {
  it('stay out of the folder while denied, pending or limited, and land once served', async () => {
    const { db } = freshDb();
    const groupsDir = tempDir('gated-withheld-');
    const web = new WebChannel(db, { uploadsDir: tempDir('gated-withheld-uploads-') });
    const post = async (state: string, text: string) => {
      const source = await web.uploads.put(Buffer.from(text));
      const id = insertInbound(db, {
        chat_jid: 'web:club',
        sender: `v${state}`,
        content: state,
        attachments: [
          { kind: 'document', name: `${state}.txt`, mime: 'text/plain', size: text.length, source },
        ],
      })!;
      db.prepare('UPDATE messages SET state = ?, group_folder = ? WHERE id = ?').run(state, 'club', id);
      return id;
    };
    const withheld = {
      denied: await post('denied', 'from a blocked sender'),
      pending: await post('pending', 'from a stranger'),
      limited: await post('limited', 'over the limit'),
    };
    const served = await post('held', 'from a member');
    const inbox = createInbox({ db, channels: [web], groupsDir, maxBytes: 1 << 20, log: silentLogger() });
    inbox.start();
    const state = (id: number) =>
      db.prepare('SELECT state FROM attachments WHERE message_id = ?').pluck().get(id) as string;
    await until(() => state(served) === 'saved', 5000, "the member's file saved");
    // The pass that saved the member's file had the older ones before it: it left them as they were.
    await inbox.idle();
    for (const id of Object.values(withheld)) {
      expect(state(id)).toBe('pending');
      expect(existsSync(join(groupsDir, 'club', 'inbox', String(id)))).toBe(false);
    }

    // An operator releases the limited row: it waits for its file again, and the file lands.
    const now = Date.now();
    expect(releaseLimited(db, 'web:club', now)).toBe(1);
    const notBefore = db
      .prepare('SELECT not_before FROM messages WHERE id = ?')
      .pluck()
      .get(withheld.limited);
    expect(notBefore).toBe(now + ATTACHMENT_WAIT_MS);
    inbox.wake();
    await until(() => state(withheld.limited) === 'saved', 5000, 'the released file saved');
    const path = join(groupsDir, 'club', 'inbox', String(withheld.limited), '0-limited.txt');
    expect(readFileSync(path, 'utf8')).toBe('over the limit');
    // Saved, the message waits no longer; the others still wait.
    expect(
      db.prepare('SELECT not_before FROM messages WHERE id = ?').pluck().get(withheld.limited),
    ).toBeNull();
    expect([state(withheld.denied), state(withheld.pending)]).toEqual(['pending', 'pending']);
    await inbox.stop();
  });
});
