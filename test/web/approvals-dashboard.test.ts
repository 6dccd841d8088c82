/**
 * The dashboard's tool approvals page, in Chromium (docs/APPROVALS.md, "Dashboard"): reached from the
 * dashboard's navigation; without the admin token it lists the pending questions read-only; with it one
 * is approved (the example agent runs the tool) and one rejected with a note (the agent gets the note);
 * both then show as decided, by the dashboard's token.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { startDemoGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

const TOKEN = 'dashboard-approvals-token-0123456789';

it('lists pending and decided tool approvals; an admin approves one and rejects one with a note', async () => {
  const g = await startDemoGated({
    GATED_IDLE_TIMEOUT_MS: '300',
    GATED_ADMIN_TOKEN: TOKEN,
  });
  const config = g.config;
  g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (10, 'platform=telegram', 'demo')`).run();
  g.db
    .prepare(`INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('demo', 1, 'Bash', 'ask')`)
    .run();
  const replies = (chat: string) =>
    g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
      .pluck()
      .all(chat) as string[];
  const codeOf = (chat: string) => async () => {
    const asked = await until(
      () => replies(chat).find((r) => r.includes('/approve ')),
      20_000,
      `ask in ${chat}`,
    );
    return /\/approve ([A-Z0-9]{5})/.exec(asked)![1]!;
  };
  // Two chats, two sessions (topics): both questions wait at once.
  g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'ann', content: '!tool Bash make deploy' });
  g.gateway.sink({
    chat_jid: 'telegram:-2',
    sender: 'ben',
    content: '!tool Bash rm -rf build',
    topic: 'ops',
  });
  const deploy = await codeOf('telegram:-1')();
  const clean = await codeOf('telegram:-2')();

  const browser = await launchChromium();
  const { page, errors } = await strictPage(browser);
  await page.goto(`${g.url}/dashboard`);
  await page.click('header nav a[href="/dashboard/approvals"]');
  await page.waitForURL(`${g.url}/dashboard/approvals`);
  const row = (code: string) => page.locator(`#pending tr[data-id="${code}"]`);
  await row(deploy).waitFor();
  await row(clean).waitFor();
  expect(await row(deploy).textContent()).toContain('make deploy');
  // Read-only without the token: no buttons.
  expect(await page.locator('#pending button').count()).toBe(0);

  await page.fill('#token', TOKEN);
  await page.click('#token-form button');
  await row(deploy).locator('button.approve').click();
  const decided = (code: string) => page.locator(`#decided tr[data-id="${code}"]`);
  await decided(deploy).waitFor();
  expect(await decided(deploy).locator('.state').textContent()).toBe('approved');
  expect(await decided(deploy).textContent()).toContain('dashboard:admin-token');
  await until(
    () => replies('telegram:-1').some((r) => r.includes('tool Bash ran: {"command":"make deploy"}')),
    20_000,
    'the tool ran',
  );
  await page.locator(`#decided tr[data-id="${deploy}"] td`, { hasText: 'yes' }).waitFor();
  await page.screenshot({ path: screenshotPath('dashboard-approvals.png'), fullPage: true });

  await row(clean).locator('input.note').fill('not before the release');
  await row(clean).locator('button.reject').click();
  await decided(clean).waitFor();
  expect(await decided(clean).locator('.state').textContent()).toBe('rejected');
  await until(
    () => replies('telegram:-2').some((r) => r.includes('tool Bash denied: not before the release')),
    20_000,
    'the note reached the agent',
  );
  expect(await page.locator('#pending').textContent()).toContain('nothing waits for a decision');
  const log = readFileSync(join(config.groupsDir, 'demo', '.tool-runs.log'), 'utf8');
  expect(log.trim().split('\n')).toEqual(['Bash {"command":"make deploy"}']);
  const audit = g.db
    .prepare(`SELECT actor FROM audit WHERE subject = 'tool_approvals' AND action = 'update' ORDER BY id`)
    .pluck()
    .all();
  expect(audit).toEqual(['dashboard:admin-token', 'dashboard:admin-token']);
  expect(errors).toEqual([]);
}, 90_000);
