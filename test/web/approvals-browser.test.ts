/**
 * Tool approvals in the web chat, in Chromium (docs/WEB.md, "Tool approvals"): the whole gated with the
 * example agent's `!tool` mode and a rule that asks about Bash. Two browsers, each its own web chat sender:
 * the one made an owner of the group approves by clicking; the other, not an approver, clicks and is
 * refused. A click posts the command as that browser's message, checked like a typed one. The question's
 * buttons give way to who decided, also after a reload.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { startDemoGated } from '../helpers/gated.js';
import { principalId, principalOf, upsertMember } from '../../store/access.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

it('an owner approves a tool call by clicking; a visitor who is not an approver is refused', async () => {
  const g = await startDemoGated({
    GATED_IDLE_TIMEOUT_MS: '300',
  });
  const config = g.config;
  g.db
    .prepare(`INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('demo', 1, 'Bash', 'ask')`)
    .run();
  const browser = await launchChromium();
  const owner = await strictPage(browser);
  const guest = await strictPage(browser);

  const open = async (page: typeof owner.page) => {
    await page.goto(`${g.url}/#demo`);
    await page.locator('.pane[data-topic=""] .conn[data-state="live"]').waitFor();
  };
  await open(owner.page);
  await open(guest.page);
  // Who the owner's browser is, as gated stored its first message (whatever the web chat's identities are).
  const ownerPane0 = owner.page.locator('.pane[data-topic=""]');
  await ownerPane0.locator('textarea').fill('hello, I run this group');
  await ownerPane0.locator('textarea').press('Enter');
  await ownerPane0
    .locator('.line.agent', { hasText: 'hello, I run this group' })
    .waitFor({ timeout: 20_000 });
  const first = g.db
    .prepare(`SELECT chat_jid, sender FROM messages WHERE content = 'hello, I run this group'`)
    .get() as { chat_jid: string; sender: string };
  const ownerSender = first.sender;
  const ownerId = principalId(principalOf(first));
  upsertMember(g.db, 'demo', ownerId, 'owner');

  const guestPane = guest.page.locator('.pane[data-topic=""]');
  const ownerPane = owner.page.locator('.pane[data-topic=""]');
  await guestPane.locator('textarea').fill('!tool Bash make deploy');
  await guestPane.locator('textarea').press('Enter');
  const question = (pane: typeof ownerPane) =>
    pane.locator('.line.status', { hasText: 'The agent wants to run Bash' });
  await question(ownerPane)
    .locator('.approval[data-state="pending"] button.approve')
    .waitFor({ timeout: 20_000 });
  await question(guestPane).locator('button.approve').waitFor();

  // The guest clicks Approve: stored as a press from the guest's visitor id, refused by the command layer.
  await question(guestPane).locator('button.approve').click();
  await guestPane.locator('.line', { hasText: 'you may not approve' }).waitFor({ timeout: 15_000 });
  const runsLog = join(config.groupsDir, 'demo', '.tool-runs.log');
  expect(existsSync(runsLog)).toBe(false);
  await owner.page.screenshot({ path: screenshotPath('chat-approval.png') });

  await question(ownerPane).locator('button.approve').click();
  const decided = question(ownerPane).locator('.approval[data-state="approved"]');
  await decided.waitFor({ timeout: 15_000 });
  expect(await decided.textContent()).toBe(`approved by ${ownerId}`);
  await ownerPane.locator('.line', { hasText: 'tool Bash ran:' }).waitFor({ timeout: 20_000 });
  await question(guestPane).locator('.approval[data-state="approved"]').waitFor();
  expect(await question(guestPane).locator('button').count()).toBe(0);
  expect(readFileSync(runsLog, 'utf8').trim().split('\n')).toEqual(['Bash {"command":"make deploy"}']);

  // After a reload the question shows who decided, from the database.
  await guest.page.reload();
  await question(guestPane).locator('.approval[data-state="approved"]').waitFor();
  expect(await question(guestPane).locator('button').count()).toBe(0);

  const presses = g.db
    .prepare(`SELECT sender, content FROM messages WHERE content LIKE '/approve %' ORDER BY id`)
    .all() as Array<{ sender: string; content: string }>;
  const code = /\/approve ([A-Z0-9]{5})/.exec(presses[0]!.content)![1]!;
  const guestSender = g.db
    .prepare(`SELECT sender FROM messages WHERE content = '!tool Bash make deploy'`)
    .pluck()
    .get();
  expect(guestSender).not.toBe(ownerSender);
  expect(presses).toEqual([
    { sender: guestSender, content: `/approve ${code}` },
    { sender: ownerSender, content: `/approve ${code}` },
  ]);
  expect(g.db.prepare('SELECT state, decided_by FROM tool_approvals').get()).toEqual({
    state: 'approved',
    decided_by: ownerId,
  });
  expect([...owner.errors, ...guest.errors]).toEqual([]);
}, 90_000);
