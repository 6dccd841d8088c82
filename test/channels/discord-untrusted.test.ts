/**
 * The agent is not trusted with files (docs/SECURITY.md, "Files"), on Discord end to end: the whole gateway
 * (startGated) with real discord.js against the local Discord server and the hostile agent, on the process
 * runtime and in a container on a real dockerd (test/helpers/runtimes.ts).
 * A link planted in inbox/ is replaced by the upload, never written through; a file swapped for a link
 * between its block and delivery is not uploaded.
 */
import { existsSync, lstatSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { closedAfterGateds } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { AGENT_RUNTIMES, useAgentRuntime, type RuntimeUnderTest } from '../helpers/runtimes.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { startE2eGated } from './e2e.js';
import { groupDirOf } from '../../core/group-dir.js';

const ada = { id: '700000000000000043', username: 'ada', global_name: 'Ada' };
const GROUP = 'dc/hostile';
const DECOY = 'the decoy, never to be sent or changed\n';

let api: DiscordApiServer | undefined;

describe.each(AGENT_RUNTIMES)('on the %s runtime', (kind) => {
  const rt = useAgentRuntime(kind, 'hostile-agent.mjs', ['mkfifo']);
  test(
    'a planted inbox link is replaced by the upload; a file swapped for a link after its block is not uploaded',
    () => plantAndSwap(rt),
    rt.ms(90_000),
  );
});

async function plantAndSwap(rt: RuntimeUnderTest): Promise<void> {
  api = closedAfterGateds(await DiscordApiServer.start());
  const g = await startE2eGated(
    { DISCORD_BOT_TOKEN: api.token, DISCORD_API_ROOT: api.apiRoot, ...rt.env() },
    { groups: [[GROUP, 'Hostile']], routes: [[0, 'platform=discord', GROUP]] },
  );
  const a = api;
  await a.waitForIdentify();
  const decoy = join(tempDir('gated-decoy-'), 'decoy.txt');
  writeFileSync(decoy, DECOY);
  const push = (content: string, attachments?: Array<{ name: string; data: Buffer; contentType: string }>) =>
    a.push({ channelId: a.dmChannelId, author: ada, content, ...(attachments ? { attachments } : {}) });

  const from = g.db.prepare(`SELECT coalesce(max(id), 0) + 1 FROM messages`).pluck().get() as number;
  push(`plant ${decoy} ${from} ${from + 30}`);
  await a.waitForPosted(1);
  expect(a.posted[0]!.content).toBe('planted');
  const upload = Buffer.from('the upload\n');
  push('', [{ name: 'note.txt', data: upload, contentType: 'text/plain' }]);
  await a.waitForPosted(2);
  const path = g.db.prepare(`SELECT path FROM attachments WHERE state = 'saved'`).pluck().get() as string;
  expect(a.posted[1]!.content).toBe(`got note.txt at ${path}`);
  const saved = join(groupDirOf(g.config.groupsDir, GROUP), path);
  expect(lstatSync(saved).isSymbolicLink()).toBe(false);
  expect(readFileSync(saved)).toEqual(upload);
  expect(readFileSync(decoy, 'utf8')).toBe(DECOY);

  // The reply's first part waits out a 429 while the agent swaps its checked file for a link to the decoy.
  a.failNext({ status: 429, retryAfterS: 3 });
  push(`swap r.txt ${decoy} 1000`);
  const folder = groupDirOf(g.config.groupsDir, GROUP);
  await until(
    () => g.db.prepare(`SELECT count(*) FROM outbound_files WHERE state = 'ok'`).pluck().get() === 1,
    rt.ms(20_000),
    'the block checked',
  );
  rmSync(join(folder, 'swap.done'), { force: true });
  writeFileSync(join(folder, 'swap.go'), '');
  await until(() => existsSync(join(folder, 'swap.done')), rt.ms(20_000), 'the agent swapped its file');
  await until(
    () => a.posted.some((p) => p.content === '[file not sent: out/r.txt (symlink)]'),
    rt.ms(30_000),
    'the refusal line',
  );
  await g.delivery.idle();
  expect(a.posted.flatMap((p) => p.attachments ?? [])).toEqual([]);
  expect(a.posted.map((p) => p.content).join('')).not.toContain('decoy');
  expect(g.db.prepare(`SELECT content FROM system_messages`).pluck().all()).toEqual([
    'the file out/r.txt was not sent: symlink',
  ]);
}
