/**
 * The agent is not trusted with files (docs/SECURITY.md, "Files"), on Telegram end to end: the whole gateway
 * (startGated) with real telegraf against the local Bot API server and the hostile agent
 * (test/agents/hostile-agent.mjs), on the process runtime and in a container on a real dockerd
 * (test/helpers/runtimes.ts). Links and FIFOs it plants in inbox/ are replaced or refused, never written
 * through; a file it swaps for a link or a FIFO between its block and delivery is not sent.
 */
import { existsSync, lstatSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { describe, expect, test } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { AGENT_RUNTIMES, useAgentRuntime, type RuntimeUnderTest } from '../helpers/runtimes.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { startE2eGated } from './e2e.js';
import { groupDirOf } from '../../core/group-dir.js';

const chat: Chat.PrivateChat = { id: 778, type: 'private', first_name: 'Ada' };
const ada: User = { id: 43, is_bot: false, first_name: 'Ada' };
const GROUP = 'tg/hostile';

let api: TelegramApiServer | undefined;
let gated: Gated | undefined;

async function start(rt: RuntimeUnderTest): Promise<{ api: TelegramApiServer; gated: Gated }> {
  api = closedAfterGateds(await TelegramApiServer.start());
  api.addChat(chat);
  gated = await startE2eGated(
    { TELEGRAM_BOT_TOKEN: api.token, TELEGRAM_API_ROOT: api.url, ...rt.env() },
    { groups: [[GROUP, 'Hostile']], routes: [[0, 'platform=telegram', GROUP]] },
  );
  await api.waitForPoll();
  return { api, gated };
}

/** A decoy tree outside every group folder: a file the agent would like gated to overwrite or send. */
function decoy(): { dir: string; file: string } {
  const dir = tempDir('gated-decoy-');
  const file = join(dir, 'decoy.txt');
  writeFileSync(file, 'the decoy, never to be sent or changed\n');
  return { dir, file };
}

const nextId = (g: Gated) =>
  g.db.prepare(`SELECT coalesce(max(id), 0) + 1 FROM messages`).pluck().get() as number;

async function say(a: TelegramApiServer, text: string, sent: number, waitMs = 15_000): Promise<string> {
  a.message({ chat, from: ada, text });
  await until(() => a.sent.length >= sent, waitMs, `reply ${sent} to '${text.slice(0, 30)}'`);
  return a.sent[sent - 1]!.text;
}

/**
 * Lets the hostile agent swap its file once gated has checked the block (the file's row is 'ok'), while
 * the reply's first part is held back by a 429; resolves when the swap is done.
 */
async function swapAfterCheck(g: Gated, messages: number): Promise<void> {
  const folder = groupDirOf(g.config.groupsDir, GROUP);
  await until(
    () => g.db.prepare(`SELECT count(*) FROM outbound_files WHERE state = 'ok'`).pluck().get() === messages,
    20_000,
    'the block checked',
  );
  rmSync(join(folder, 'swap.done'), { force: true });
  writeFileSync(join(folder, 'swap.go'), '');
  await until(() => existsSync(join(folder, 'swap.done')), 20_000, 'the agent swapped its file');
}

describe.each(AGENT_RUNTIMES)('on the %s runtime', (kind) => {
  // mkfifo: the agent plants FIFOs from inside its container too.
  const rt = useAgentRuntime(kind, 'hostile-agent.mjs', ['mkfifo']);

  test(
    'links and FIFOs planted in inbox/ are replaced or refused: the upload lands in the folder, nothing outside changes',
    async () => {
      const { api, gated } = await start(rt);
      const d = decoy();
      const from = nextId(gated);
      expect(await say(api, `plant ${d.file} ${from} ${from + 30}`, 1, rt.ms(15_000))).toBe('planted');

      // The upload replaces the planted link as an entry; the FIFO at the old temporary name is never opened.
      const upload = Buffer.from('the upload, not the decoy\n');
      api.message({
        chat,
        from: ada,
        text: '',
        file: { kind: 'document', data: upload, name: 'note.txt', mime: 'text/plain' },
      });
      await until(() => api.sent.length >= 2, rt.ms(15_000), 'the upload answered');
      const row = gated.db
        .prepare(`SELECT message_id, path, state FROM attachments ORDER BY id DESC LIMIT 1`)
        .get() as { message_id: number; path: string; state: string };
      expect(row).toEqual({
        message_id: row.message_id,
        path: `inbox/${row.message_id}/0-note.txt`,
        state: 'saved',
      });
      expect(api.sent[1]!.text).toBe(`got note.txt at ${row.path}`);
      const saved = join(groupDirOf(gated.config.groupsDir, GROUP), row.path);
      expect(lstatSync(saved).isSymbolicLink()).toBe(false);
      expect(readFileSync(saved)).toEqual(upload);
      expect(readFileSync(d.file, 'utf8')).toBe('the decoy, never to be sent or changed\n');

      // A planted directory link: refused with its reason, the agent told, nothing written into the decoy tree.
      const from2 = nextId(gated);
      expect(await say(api, `plant-dir ${d.dir} ${from2} ${from2 + 30}`, 3)).toBe('planted dirs');
      api.message({
        chat,
        from: ada,
        text: '',
        file: { kind: 'document', data: upload, name: 'note.txt', mime: 'text/plain' },
      });
      await until(() => api.sent.length >= 4, rt.ms(15_000), 'the refused upload answered');
      const refused = gated.db
        .prepare(`SELECT message_id, state, error FROM attachments ORDER BY id DESC LIMIT 1`)
        .get() as { message_id: number; state: string; error: string };
      expect(refused.message_id).toBeGreaterThanOrEqual(from2);
      expect(refused).toMatchObject({
        state: 'failed',
        error: `refused: symlink at inbox/${refused.message_id}/0-note.txt`,
      });
      expect(api.sent[3]!.text.split('\n')[0]).toBe(
        `note: document note.txt could not be downloaded: ${refused.error}`,
      );
      expect(readdirSync(d.dir)).toEqual(['decoy.txt']);
    },
    rt.ms(60_000),
  );

  test(
    'a file swapped for a link or a FIFO after its block is refused at delivery: the chat gets a line, the session a note',
    async () => {
      const { api, gated } = await start(rt);
      const d = decoy();
      api.failNext('sendMessage', { status: 429, retryAfterS: 3 });
      api.message({ chat, from: ada, text: `swap r.txt ${d.file} 1500` });
      await swapAfterCheck(gated, 1);
      await until(
        () => api.sent.some((m) => m.text.startsWith('[file not sent')),
        rt.ms(20_000),
        'the refusal line',
      );
      await gated.delivery.idle();
      expect(api.sentFiles).toEqual([]);
      const texts = api.sent.map((m) => m.text);
      expect(texts.length).toBeGreaterThanOrEqual(3);
      expect(texts.at(-1)).toBe('[file not sent: out/r.txt (symlink)]');
      expect(texts.join('')).not.toContain('decoy');
      expect(gated.db.prepare(`SELECT error FROM outbound_files`).pluck().all()).toEqual([
        'refused at delivery: symlink',
      ]);
      expect(gated.db.prepare(`SELECT content FROM system_messages`).pluck().all()).toEqual([
        'the file out/r.txt was not sent: symlink',
      ]);

      // The same with a FIFO: delivery does not hang on it, and the chat goes on.
      api.failNext('sendMessage', { status: 429, retryAfterS: 3 });
      api.message({ chat, from: ada, text: 'swap s.txt fifo 1500' });
      await swapAfterCheck(gated, 2);
      await until(
        () => api.sent.some((m) => m.text === '[file not sent: out/s.txt (not a regular file)]'),
        rt.ms(20_000),
        'fifo refusal',
      );
      expect(await say(api, 'canary', api.sent.length + 1)).toBe('echo: canary');
      expect(api.sentFiles).toEqual([]);
    },
    rt.ms(60_000),
  );

  test(
    'a FIFO named in a block is refused when the block arrives, without being opened, and the session gets a note',
    async () => {
      const { api, gated } = await start(rt);
      expect(await say(api, 'send-fifo p.txt', 1)).toBe('sending a fifo');
      expect(await say(api, 'canary', 2)).toBe('echo: canary');
      expect(gated.db.prepare(`SELECT state, error FROM outbound_files`).get()).toEqual({
        state: 'refused',
        error: 'not a regular file',
      });
      expect(api.sentFiles).toEqual([]);
      // The session is told (§17), and the canary's line carried the note to it.
      expect(
        gated.db.prepare(`SELECT content, consumed_at IS NOT NULL AS consumed FROM system_messages`).all(),
      ).toEqual([{ content: 'the file out/p.txt was not sent: not a regular file', consumed: 1 }]);
    },
    rt.ms(60_000),
  );
});
