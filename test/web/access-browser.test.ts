import { describe, expect, it } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { setLimits, upsertMember } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

const TOKEN = 'access-panel-test-token';

/** The whole gated (process runtime, example agent) with an approval group and a limited open group. */
async function startWholeGated(): Promise<Gated> {
  const gated = await startTestGated({
    channels: [],
    graceMs: 2000,
    env: {
      GATED_RUNTIME: 'process',
      GATED_POLL_MS: '50',
      GATED_IDLE_TIMEOUT_MS: '300',
      GATED_ADMIN_TOKEN: TOKEN,
      GATED_ADMINS: 'telegram:1',
    },
  });
  const { db, config } = gated;
  addGroup(db, config.groupsDir, 'club');
  addGroup(db, config.groupsDir, 'lounge');
  db.prepare(`UPDATE registered_groups SET access = 'approval' WHERE folder = 'club'`).run();
  upsertMember(db, 'club', 'telegram:7', 'owner');
  upsertMember(db, 'lounge', 'discord:666', 'blocked');
  setLimits(db, 'lounge', { senderPerHour: 1, runsPerDay: null, costPerDayUsd: null });
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, 'platform=discord', 'lounge')`).run();
  return gated;
}

describe('the access page in chromium', () => {
  it('lists pending codes, approves and rejects with the admin token, releases a limited chat', async () => {
    const gated = await startWholeGated();
    const { db } = gated;
    const state = (id: number) => db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
    const ann = gated.gateway.sink({
      chat_jid: 'telegram:-10',
      sender: '101',
      sender_name: 'Ann',
      content: 'hi, may I?',
    })!;
    const bob = gated.gateway.sink({
      chat_jid: 'telegram:-11',
      sender: '102',
      sender_name: 'Bob',
      content: 'let me in',
    })!;
    gated.gateway.sink({ chat_jid: 'discord:5', sender: '666', content: 'spam' });
    gated.gateway.sink({ chat_jid: 'discord:5', sender: '55', content: 'first' });
    const over = gated.gateway.sink({
      chat_jid: 'discord:5',
      sender: '55',
      content: 'second, over the limit',
    })!;
    await until(() => state(over) === 'limited' && state(bob) === 'pending', 10_000, 'decisions');
    const code = (id: number) =>
      db.prepare('SELECT code FROM approvals WHERE message_id = ?').pluck().get(id) as string;

    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${gated.url}/dashboard/access`);
    // Read-only without the token: the codes are listed, without buttons.
    await page.locator(`#approvals tr.approval[data-id="${code(ann)}"]`).waitFor();
    expect(await page.locator('#approvals tr.approval').count()).toBe(2);
    expect(await page.locator('#approvals button').count()).toBe(0);
    await page
      .locator('#withheld tr.withheld.denied', { hasText: 'discord:666 is blocked in lounge' })
      .waitFor();
    await page
      .locator('#withheld tr.withheld.limited', { hasText: '1 messages per sender per hour' })
      .waitFor();
    expect(await page.locator('#access-groups tr.group[data-id="club"]').textContent()).toContain('approval');

    await page.fill('#token', TOKEN);
    await page.click('#token-form button');
    await page.locator(`#approvals tr[data-id="${code(ann)}"] button.approve`).click();
    await page.locator('#notice', { hasText: /approved telegram:101 as a member of club/ }).waitFor();
    await page.locator(`#approvals tr[data-id="${code(ann)}"]`).waitFor({ state: 'detached' });
    // Ann's message reaches the agent and is answered.
    await until(() => state(ann) === 'done', 15_000, "Ann's message answered");
    await page.locator('#members tr.member', { hasText: 'telegram:101' }).waitFor();
    await page.locator('#audit tr', { hasText: 'dashboard:admin-token' }).first().waitFor();
    await page.screenshot({ path: screenshotPath('access.png'), fullPage: true });

    await page.locator(`#approvals tr[data-id="${code(bob)}"] button.reject`).click();
    await page.locator('#notice', { hasText: /rejected telegram:102/ }).waitFor();
    await page
      .locator(`#withheld tr.withheld.denied[data-id="${bob}"]`, { hasText: 'rejected by dashboard' })
      .waitFor();
    expect(state(bob)).toBe('denied');

    await page.locator(`#withheld tr[data-id="${over}"] button.release`).click();
    await page.locator('#notice', { hasText: '1 message(s) of discord:5 released' }).waitFor();
    await until(() => state(over) === 'done', 15_000, 'the released message answered');
    expect(errors).toEqual([]);
  }, 120_000);

  it('refuses decisions without the admin token', async () => {
    const gated = await startWholeGated();
    const res = await fetch(`${gated.url}/api/access/approve`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ code: 'ABCDEFGH' }),
    });
    expect(res.status).toBe(401);
    const ok = await fetch(`${gated.url}/api/access/approve`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ code: 'ABCDEFGH' }),
    });
    expect(ok.status).toBe(404);
    expect(((await ok.json()) as { error: string }).error).toBe('not approved: no pairing code ABCDEFGH');
  });
});
