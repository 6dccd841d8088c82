import { describe, expect, it } from 'vitest';
import { reply, startWebServer } from '../http/harness.js';
import { launchChromium, strictPage } from './chromium.js';

// The chat and dashboard pages in a real browser against the real HTTP app; replies are written and
// delivered the way the gateway's outbox does it (row first, then web.send). The whole gated, with the
// example agent answering, is driven by browser.test.ts.
describe('web pages in chromium (HTTP app only)', () => {
  it('sends, shows streamed replies per topic, marks status lines, and keeps history across a reload', async () => {
    const s = await startWebServer();
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${s.url}/#demo`);
    const main = page.locator('.pane[data-topic=""]');
    await main.locator('.conn[data-state="live"]').waitFor();
    await main.locator('textarea').fill('hello from the browser');
    await main.locator('textarea').press('Enter');
    await main.locator('.line.user', { hasText: 'hello from the browser' }).waitFor();
    const row = s.db.prepare('SELECT chat_jid, topic, content FROM messages WHERE is_from_me = 0').get();
    expect(row).toEqual({ chat_jid: 'web:demo', topic: '', content: 'hello from the browser' });
    await reply(s, 'demo', '', '[tool] looking things up');
    await reply(s, 'demo', '', 'echo: hello from the browser');
    await main.locator('.line.status', { hasText: 'looking things up' }).waitFor();
    await main.locator('.line.agent', { hasText: 'echo: hello from the browser' }).waitFor();

    await page.fill('#new-topic', 'support');
    await page.click('#add-topic button');
    const support = page.locator('.pane[data-topic="support"]');
    await support.locator('.conn[data-state="live"]').waitFor();
    await support.locator('textarea').fill('second topic');
    await support.locator('button[type="submit"]').click();
    await support.locator('.line.user', { hasText: 'second topic' }).waitFor();
    await reply(s, 'demo', 'support', 'echo: second topic');
    await support.locator('.line.agent', { hasText: 'echo: second topic' }).waitFor();
    expect(await main.locator('.line').count()).toBe(3);

    await page.reload();
    await page
      .locator('.pane[data-topic="support"] .line.agent', { hasText: 'echo: second topic' })
      .waitFor();
    expect(await page.locator('.pane[data-topic=""] .line').allTextContents()).toEqual([
      'youhello from the browser',
      'statuslooking things up',
      'agentecho: hello from the browser',
    ]);
    expect(errors).toEqual([]);
  }, 60_000);

  it('shows routes with hits and reasons, explains, and edits only with the token', async () => {
    const token = 'dash-token-0123456789';
    // The channels panel lists the started channels (here the web chat, which has no platform to reach).
    const s: Awaited<ReturnType<typeof startWebServer>> = await startWebServer({
      adminToken: token,
      channels: () => [s.web],
    });
    const good = Number(
      s.db.prepare("INSERT INTO routes (seq, match, target) VALUES (0, 'platform=web', 'demo')").run()
        .lastInsertRowid,
    );
    s.db.prepare("INSERT INTO routes (seq, match, target) VALUES (5, 'colour=red', 'demo')").run();
    s.db.prepare('INSERT INTO route_hits (route_id, hits) VALUES (?, 4)').run(good);
    s.metrics.agentStarted('swarm', 'worker-1', 1.5);
    s.metrics.lanes(1, 3);
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${s.url}/dashboard`);
    const goodRow = page.locator(`#routes tr[data-id="${good}"]`);
    await goodRow.waitFor();
    expect(await goodRow.locator('.hits').textContent()).toBe('4');
    // The cluster panel: where agents ran, and lanes waiting for a slot.
    await page.locator('#panel-cluster td', { hasText: 'worker-1' }).waitFor();
    expect(await page.locator('#panel-cluster tbody tr td').allTextContents()).toEqual(
      expect.arrayContaining(['swarm', 'worker-1', '1', '1.5 s']),
    );
    expect(await page.locator('#panel-cluster p').textContent()).toBe(
      '1 with an agent (running or idle), 3 waiting for a slot',
    );
    await page.locator('#panel-channels td', { hasText: 'in process' }).waitFor();
    expect((await page.locator('#panel-channels tbody tr td').allTextContents()).slice(0, 3)).toEqual([
      'web',
      'in process',
      '—',
    ]);
    await page.locator('#routes tr.invalid', { hasText: "unknown key 'colour'" }).waitFor();
    expect(await page.locator('#add-route').isHidden()).toBe(true);

    await page.fill('#explain input[name="platform"]', 'web');
    await page.fill('#explain input[name="room"]', 'demo');
    await page.click('#explain button');
    await page.locator('#explain-out .outcome', { hasText: 'target: demo' }).waitFor();
    expect(await page.locator('#explain-out tr.explain.invalid').count()).toBe(1);

    await page.fill('#token', token);
    await page.click('#token-form button');
    await page.locator('#add-route').waitFor({ state: 'visible' });
    await page.fill('#add-route input[name="seq"]', '50');
    await page.fill('#add-route input[name="match"]', 'verb=follow');
    await page.fill('#add-route input[name="target"]', 'builtin:drop');
    await page.click('#add-route button');
    await page.locator('#routes tr', { hasText: 'builtin:drop' }).waitFor();
    expect(s.db.prepare("SELECT seq, match FROM routes WHERE target = 'builtin:drop'").get()).toEqual({
      seq: 50,
      match: 'verb=follow',
    });
    expect(await page.content()).not.toContain(token);
    expect(errors).toEqual([]);
  }, 60_000);
});
