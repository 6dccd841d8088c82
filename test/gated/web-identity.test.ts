/**
 * The whole gated (process runtime, the example agent, its HTTP server) with web identities (docs/SECURITY.md):
 * a browser that calls itself "boss" is no admin whatever GATED_ADMINS says, the token holder is; and a
 * stranger's upload to an approval group stays out of the group's folder until an owner approves it.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { getJson, postJson, visit } from '../http/harness.js';

const TOKEN = 'web-identity-admin-token-0123456789';
const ADMIN = { authorization: `Bearer ${TOKEN}` };
const running: Gated[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.close(2000);
});

async function start(): Promise<Gated & { url: string; groupsDir: string }> {
  const dir = tempDir('gated-web-identity-');
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_RUNTIME: 'process',
    GATED_HTTP_PORT: '0',
    GATED_POLL_MS: '50',
    GATED_IDLE_TIMEOUT_MS: '1000',
    GATED_LOG_LEVEL: 'silent',
    GATED_ADMIN_TOKEN: TOKEN,
    // Every name a browser could once give itself to pass for an admin.
    GATED_ADMINS: 'boss,web-boss,web:boss,web:web-boss,admin,web:admin',
  });
  const setup = openDatabase(config.db);
  addGroup(setup, config.groupsDir, 'demo', 'Demo');
  addGroup(setup, config.groupsDir, 'club', 'Club');
  setup.prepare(`UPDATE registered_groups SET access = 'approval' WHERE folder = 'club'`).run();
  setup.close();
  const gated = await startGated({ config, log: silentLogger(), channels: [] });
  running.push(gated);
  if (!gated.url) throw new Error('gated started without its HTTP server');
  return Object.assign(gated, { url: gated.url, groupsDir: config.groupsDir });
}

/** The gateway's answer to inbound row `id`, once written. */
function answerTo(g: Gated, id: number): Promise<string> {
  return until(
    () =>
      g.db
        .prepare('SELECT content FROM messages WHERE reply_to_id = ? AND is_from_me = 1')
        .pluck()
        .get(id) as string | undefined,
    10_000,
    `the answer to row ${id}`,
  );
}

describe('web identities in the whole gated', () => {
  it('a browser naming itself "boss" is not an admin; whoever presents GATED_ADMIN_TOKEN is', async () => {
    const g = await start();
    const spoof = await postJson(`${g.url}/api/chat/send`, {
      group: 'demo',
      content: '/status',
      client: 'boss',
    });
    expect(spoof.status).toBe(201);
    expect(g.db.prepare('SELECT sender FROM messages WHERE id = ?').pluck().get(spoof.body.id)).toMatch(
      /^v[0-9a-f]{20}$/,
    );
    expect(await answerTo(g, spoof.body.id as number)).toBe('/status is for admins (GATED_ADMINS)');

    const admin = await postJson(`${g.url}/api/chat/send`, { group: 'demo', content: '/status' }, ADMIN);
    expect(g.db.prepare('SELECT sender FROM messages WHERE id = ?').pluck().get(admin.body.id)).toBe('admin');
    expect(await answerTo(g, admin.body.id as number)).toMatch(/^groups: 2\nactive runs: \d+/);
  });

  it("a pending stranger's upload stays out of the group's folder until an owner approves it", async () => {
    const g = await start();
    const inbox = join(g.groupsDir, 'club', 'inbox');
    const stranger = await visit(g.url);
    const upload = (headers: Record<string, string>, name: string, text: string) => {
      const f = new FormData();
      f.append('group', 'club');
      f.append('content', `here is ${name}`);
      f.append('file', new Blob([text], { type: 'text/plain' }), name);
      return fetch(`${g.url}/api/chat/upload`, { method: 'POST', body: f, headers }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { id: number },
      }));
    };
    const knock = await upload(stranger.headers, 'stranger.txt', 'from a stranger');
    expect(knock.status).toBe(201);
    const notice = await answerTo(g, knock.body.id);
    const code = /pairing code is ([A-Z2-9]{8})/.exec(notice)![1]!;
    expect(g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(knock.body.id)).toBe(
      'pending',
    );
    // The stranger reads its own code in the chat (its own lines only).
    const seen = await getJson(`${g.url}/api/chat/history?group=club`, stranger.headers);
    expect((seen.body.lines as { content: string }[]).map((l) => l.content)).toEqual([
      'here is stranger.txt',
      notice,
    ]);

    // Two uploads of the admin, one after the other is saved: when the second is saved, the inbox has
    // finished a whole pass after the stranger's (older) file was routed, and left it where it was.
    const savedPath = (id: number) =>
      g.db
        .prepare(`SELECT path FROM attachments WHERE message_id = ? AND state = 'saved'`)
        .pluck()
        .get(id) as string | undefined;
    const served: number[] = [];
    for (const name of ['admin1.txt', 'admin2.txt']) {
      const up = await upload(ADMIN, name, `from the admin: ${name}`);
      served.push(up.body.id);
      const path = await until(() => savedPath(up.body.id), 10_000, `the admin's ${name} saved`);
      expect(readFileSync(join(g.groupsDir, 'club', path), 'utf8')).toBe(`from the admin: ${name}`);
    }
    expect(existsSync(join(inbox, String(knock.body.id)))).toBe(false);
    expect(readdirSync(inbox).sort()).toEqual(served.map(String).sort());
    expect(
      g.db.prepare('SELECT state FROM attachments WHERE message_id = ?').pluck().get(knock.body.id),
    ).toBe('pending');

    // A spoofed owner cannot approve; the admin can, and the file lands then, before the agent sees it.
    const spoofed = await postJson(`${g.url}/api/chat/send`, {
      group: 'demo',
      content: `/approve ${code}`,
      client: 'boss',
    });
    expect(await answerTo(g, spoofed.body.id as number)).toMatch(
      /^you may not approve [A-Z2-9]{8}: no such code is open to you( \(owners of demo decide its questions; you are web:v[0-9a-f]{20}: the operator makes you one with 'gated access add demo web:v[0-9a-f]{20} --role owner'\))?$/,
    );
    const approve = await postJson(
      `${g.url}/api/chat/send`,
      { group: 'demo', content: `/approve ${code}` },
      ADMIN,
    );
    expect(await answerTo(g, approve.body.id as number)).toMatch(
      /^approved web:v[0-9a-f]{20} as a member of club/,
    );
    const strangerFile = await until(() => savedPath(knock.body.id), 10_000, "the stranger's file saved");
    expect(strangerFile).toBe(`inbox/${knock.body.id}/0-stranger.txt`);
    expect(readFileSync(join(g.groupsDir, 'club', strangerFile), 'utf8')).toBe('from a stranger');
    await until(
      () => g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(knock.body.id) === 'done',
      15_000,
      "the stranger's message answered",
    );
  });
});
