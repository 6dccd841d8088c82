/**
 * The Claude agent's turn with tool calls, against the local Messages API (process runtime, whole gated):
 * the texts the model writes before its tool calls are kept in the final answer, each tool call shows as a
 * status line in the drafts, and a file the model wrote and attached reaches the chat with the answer.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();

test(
  'texts before tool calls kept, tool status lines as drafts, an attached file sent with the answer',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start({
      // Every draft the agent prints reaches the partial signal (no 400 ms spacing), so the test sees them all.
      env: {
        GATED_AGENT_CMD: `GATED_CLAUDE_PARTIAL_MS=0 node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`,
      },
    });
    const drafts: string[] = [];
    chat.gated.signals.partial.on((p) => drafts.push(p.text));
    const id = chat.send('ATTACH report.txt hello-file');
    const answer = await chat.reply(id);

    // Every text of the turn, in order; no status line in the answer.
    expect(answer).toBe(
      'I will write report.txt first.\n\nWritten; now attaching it.\n\nHere is report.txt.',
    );
    // Read once delivery is done: delivery takes the file out of the folder into gated's spool for the
    // moment it reads it (core/safe-file.ts, openInFolder), so a look during delivery can miss it.
    await chat.gated.delivery.idle();
    expect(readFileSync(join(chat.groupDir, 'report.txt'), 'utf8')).toBe('hello-file');

    // The drafts showed each tool call as a status line, with what it works on, after the text before it.
    expect(drafts.some((d) => /I will write report\.txt first\.\n\n⚙ Write report\.txt/.test(d))).toBe(true);
    expect(drafts.some((d) => /Written; now attaching it\.\n\n⚙ attach report\.txt/.test(d))).toBe(true);

    // The file travels with the reply row, checked inside the folder and delivered.
    const replyId = chat.gated.db
      .prepare(`SELECT id FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`)
      .pluck()
      .get(id) as number;
    const files = chat.gated.db
      .prepare(`SELECT path, name, mime, state FROM outbound_files WHERE message_id = ?`)
      .all(replyId);
    expect(files).toEqual([{ path: 'report.txt', name: 'report.txt', mime: 'text/plain', state: 'ok' }]);
    expect(chat.gated.db.prepare(`SELECT delivery FROM messages WHERE id = ?`).pluck().get(replyId)).toBe(
      'sent',
    );
  },
);

test(
  'a file outside the folder, or one that does not exist, is refused to the model',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start();
    const id = chat.send('TOOL attach {"path":"/etc/passwd"}');
    expect(await chat.reply(id)).toContain('only files inside the working directory can be attached');
    const missing = chat.send('TOOL attach {"path":"nothing-here.txt"}');
    expect(await chat.reply(missing)).toContain('there is no file nothing-here.txt');
    const files = chat.gated.db.prepare(`SELECT count(*) FROM outbound_files`).pluck().get();
    expect(files).toBe(0);
  },
);
