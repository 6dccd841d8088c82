/**
 * Web identities in the real web chat, in chromium, against the whole gated with the example agent
 * (docs/SECURITY.md "Identities"): a stranger's browser sees nothing of a members-only group's chat but its own
 * lines, and the whole chat once it is a member; the admin signs in with the token through the page.
 */
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { postJson } from '../http/harness.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

const TOKEN = 'identity-browser-admin-token-0123456789';
const running: Gated[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.close(2000);
});

async function start(): Promise<Gated & { url: string }> {
  const dir = tempDir('gated-identity-browser-');
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_RUNTIME: 'process',
    GATED_HTTP_PORT: '0',
    GATED_POLL_MS: '50',
    GATED_IDLE_TIMEOUT_MS: '1000',
    GATED_LOG_LEVEL: 'silent',
    GATED_ADMIN_TOKEN: TOKEN,
  });
  const setup = openDatabase(config.db);
  addGroup(setup, config.groupsDir, 'club', 'Club');
  setup.prepare(`UPDATE registered_groups SET access = 'members' WHERE folder = 'club'`).run();
  setup.close();
  const gated = await startGated({ config, log: silentLogger(), channels: [] });
  running.push(gated);
  if (!gated.url) throw new Error('gated started without its HTTP server');
  return Object.assign(gated, { url: gated.url });
}

/** The texts of the main pane's lines, once its stream is live. */
async function shown(page: Page): Promise<string[]> {
  const main = page.locator('.pane[data-topic=""]');
  await main.locator('.conn[data-state="live"]').waitFor();
  return main.locator('.line .texts').allTextContents();
}

describe('web identities in chromium', () => {
  it("a stranger's browser is refused a members-only group's history; a member's and the admin's are not", async () => {
    const g = await start();
    // The admin (the token holder) talks in the members-only club; the agent answers.
    const plan = await postJson(
      `${g.url}/api/chat/send`,
      { group: 'club', content: 'the members plan', clientMsgId: 'p1' },
      { authorization: `Bearer ${TOKEN}` },
    );
    expect(plan.status).toBe(201);
    await until(
      () =>
        g.db
          .prepare(`SELECT 1 FROM messages WHERE reply_to_id = ? AND kind = 'reply' AND delivery = 'sent'`)
          .get(plan.body.id),
      20_000,
      "the agent's answer to the admin",
    );

    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${g.url}/#club`);
    await page.locator('#me', { hasText: 'you are web:' }).waitFor();
    const me = (await page.locator('#me').textContent()) ?? '';
    const visitor = /you are web:(v[0-9a-f]{20})$/.exec(me)?.[1];
    expect(visitor).toBeDefined();
    const main = page.locator('.pane[data-topic=""]');
    await main.locator('.restricted', { hasText: 'club answers its members only' }).waitFor();
    expect(await shown(page)).toEqual([]);

    // Its own line is its own to see; what the members wrote stays out, also after a reload.
    await main.locator('textarea').fill('let me in');
    await main.locator('textarea').press('Enter');
    await main.locator('.line.user', { hasText: 'let me in' }).waitFor();
    await until(
      () =>
        g.db
          .prepare(`SELECT state FROM messages WHERE sender = ? AND chat_jid = 'web:club'`)
          .pluck()
          .get(visitor) === 'denied',
      10_000,
      "the stranger's post denied",
    );
    await page.reload();
    expect(await shown(page)).toEqual(['let me in']);
    const html = await page.content();
    expect(html).not.toContain('members plan');
    await page.screenshot({ path: screenshotPath('chat-stranger.png') });

    // Made a member (by its issued id), the same browser reads the whole chat.
    g.db
      .prepare(`INSERT INTO members (group_folder, sender, role) VALUES ('club', ?, 'member')`)
      .run(`web:${visitor}`);
    await page.reload();
    const all = await shown(page);
    expect(all[0]).toBe('the members plan');
    expect(all.some((t) => t.includes('echo: the members plan'))).toBe(true);
    expect(all.at(-1)).toBe('let me in');
    expect(await main.locator('.restricted').isHidden()).toBe(true);

    // Another browser signs in with the token through the page and reads the chat as the admin.
    const { page: admin, errors: adminErrors } = await strictPage(browser);
    await admin.goto(`${g.url}/#club`);
    await admin.locator('.pane[data-topic=""] .restricted').waitFor();
    await admin.locator('#admin-token').fill(TOKEN);
    await admin.locator('#admin-login button').click();
    await admin.locator('#me', { hasText: 'web:admin (admin)' }).waitFor();
    expect((await shown(admin))[0]).toBe('the members plan');
    await admin.locator('#admin-logout').click();
    await admin.locator('#me', { hasText: 'you are web:v' }).waitFor();
    expect(await shown(admin)).toEqual([]);
    expect([...errors, ...adminErrors]).toEqual([]);
  });
});
