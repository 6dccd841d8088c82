import { describe, expect, it } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { startDemoGated } from '../helpers/gated.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

/** The whole gated as `npm start` runs it (process runtime, example agent, demo group), on a free port. */
async function startWholeGated(): Promise<Gated> {
  // Agents stay up 5 s after answering, so the dashboard can show their lanes.
  const gated = await startDemoGated({ GATED_IDLE_TIMEOUT_MS: '5000' });
  if (!gated.url) throw new Error('gated started without its HTTP server');
  return gated;
}

describe('the whole gated in chromium', () => {
  it('chat: streamed replies from the example agent, two topics, history after reload; dashboard: hits and reasons', async () => {
    const gated = await startWholeGated();
    const routed = Number(
      gated.db
        .prepare("INSERT INTO routes (seq, match, target) VALUES (10, 'platform=telegram', 'demo')")
        .run().lastInsertRowid,
    );
    const invalid = Number(
      gated.db.prepare("INSERT INTO routes (seq, match, target) VALUES (20, 'colour=red', 'demo')").run()
        .lastInsertRowid,
    );
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);

    await page.goto(`${gated.url}/#demo`);
    const main = page.locator('.pane[data-topic=""]');
    await main.locator('.conn[data-state="live"]').waitFor();
    await main.locator('textarea').fill('hello gated');
    await main.locator('textarea').press('Enter');
    await main.locator('.line.user', { hasText: 'hello gated' }).waitFor();
    await main.locator('.line.agent', { hasText: 'echo: hello gated' }).waitFor({ timeout: 15_000 });

    // Two topics at once: each is its own session, both answered.
    await page.fill('#new-topic', 'support');
    await page.click('#add-topic button');
    const support = page.locator('.pane[data-topic="support"]');
    await support.locator('.conn[data-state="live"]').waitFor();
    await support.locator('textarea').fill('question for support');
    await main.locator('textarea').fill('and one more for main');
    // One after the other (a key press needs focus), both before either agent has answered.
    await support.locator('textarea').press('Enter');
    await main.locator('textarea').press('Enter');
    await support
      .locator('.line.agent', { hasText: 'echo: question for support' })
      .waitFor({ timeout: 15_000 });
    await main
      .locator('.line.agent', { hasText: 'echo: and one more for main' })
      .waitFor({ timeout: 15_000 });
    const runs = gated.db
      .prepare(
        `SELECT topic, started_at AS s, coalesce(ended_at, '9999') AS e FROM session_log WHERE group_folder = 'demo'`,
      )
      .all() as { topic: string; s: string; e: string }[];
    expect([...new Set(runs.map((r) => r.topic))].sort()).toEqual(['', 'support']);
    // Separate sessions, and at the same time: the support run overlaps a run of the main topic.
    const sup = runs.find((r) => r.topic === 'support')!;
    expect(runs.some((r) => r.topic === '' && r.s < sup.e && sup.s < r.e)).toBe(true);

    await page.reload();
    await page
      .locator('.pane[data-topic="support"] .line.agent', { hasText: 'echo: question for support' })
      .waitFor();
    expect(await page.locator('.pane[data-topic=""] .line').allTextContents()).toEqual([
      'youhello gated',
      'agentecho: hello gated',
      'youand one more for main',
      'agentecho: and one more for main',
    ]);
    await page.screenshot({ path: screenshotPath('chat.png') });

    // A message the routes table decides (web chats go straight to their folder): as a Telegram adapter
    // would store it. The dashboard shows the route that took it, with its hit count.
    await page.goto(`${gated.url}/dashboard`);
    const hits = page.locator(`#routes tr[data-id="${routed}"] .hits`);
    await hits.waitFor();
    expect(await hits.textContent()).toBe('0');
    gated.gateway.sink({ chat_jid: 'telegram:42', sender: 'u1', content: 'routed by the table' });
    await page
      .locator(`#routes tr[data-id="${routed}"] .hits`, { hasText: '1' })
      .waitFor({ timeout: 15_000 });
    const bad = page.locator(`#routes tr.invalid[data-id="${invalid}"]`);
    expect(await bad.textContent()).toContain("invalid: unknown key 'colour'");
    await page.locator('#runs tr.run', { hasText: 'support' }).first().waitFor();
    // The agent that answered the Telegram chat is still up (idle, or running): its lane is listed.
    await page.locator('#lanes tr.lane', { hasText: 'telegram:42' }).waitFor({ timeout: 10_000 });
    await page.fill('#explain input[name="platform"]', 'telegram');
    await page.fill('#explain input[name="room"]', '42');
    await page.click('#explain button');
    await page.locator('#explain-out .outcome', { hasText: 'target: demo' }).waitFor();
    await page.screenshot({ path: screenshotPath('dashboard.png'), fullPage: true });
    expect(errors).toEqual([]);
  }, 120_000);
});
