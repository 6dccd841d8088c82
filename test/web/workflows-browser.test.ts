import { describe, expect, it } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { addProfiles, SHIP, writeWorkflows } from '../gateway/workflow-support.js';
import { tempDir } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

/**
 * The workflows page follows a run live (docs/WORKFLOWS.md, "The dashboard"), and the waiting page lists its
 * gate: in Chromium, against a whole gated on the example agent, without reloading the page.
 */
describe('the workflow pages in chromium', () => {
  it('a run page shows the gate waiting with its code, then the run done once the owner approves', async () => {
    const configDir = tempDir();
    const g = await startTestGated({
      channels: [],
      graceMs: 2000,
      env: { GATED_POLL_MS: '50', GATED_IDLE_TIMEOUT_MS: '300', GATED_CONFIG_DIR: configDir },
    });
    addGroup(g.db, g.config.groupsDir, 'ops');
    g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'ops')`).run();
    upsertMember(g.db, 'ops', 'telegram:owner', 'owner');
    addProfiles(g.db);
    writeWorkflows(configDir, { ship: SHIP });
    const send = (content: string) => g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'owner', content });
    send('/workflow run ship a page');
    const code = await until(
      () => g.db.prepare(`SELECT code FROM tool_approvals WHERE state = 'pending'`).pluck().get() as string,
      20_000,
      'the gate asks',
    );

    const browser = await launchChromium();
    try {
      const { page, errors } = await strictPage(browser);
      await page.goto(`${g.url}/dashboard/waiting`);
      const row = page.locator(`#waiting tr[data-id="${code}"]`);
      await row.waitFor();
      expect(await row.textContent()).toContain('workflow gate');

      await page.goto(`${g.url}/dashboard/workflows#run=1`);
      await page.locator('#run-steps tr.wf-step.asking', { hasText: `/approve ${code}` }).waitFor();
      expect(await page.locator('#run-steps tr.wf-step.done').count()).toBe(1);
      await page.screenshot({ path: screenshotPath('workflow-run.png'), fullPage: true });
      send(`/approve ${code}`);
      // The same page, not reloaded, follows the run to its end.
      await page.locator('#run-facts .wf-state.done').waitFor({ timeout: 30_000 });
      expect(await page.locator('#run-steps tr.wf-step.done').count()).toBe(4);
      expect(await page.locator('#run-events tr', { hasText: 'ended' }).count()).toBe(1);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 90_000);
});
