import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { loadConfig } from '../../core/config.js';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

const running: Gated[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.close(2000);
});

const ADMIN_TOKEN = 'ui-test-admin-token';

/** The whole gated as `npm start` runs it (process runtime, example agent, demo group), on a free port. */
async function startWholeGated(): Promise<Gated> {
  const dir = tempDir('gated-ui-');
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_RUNTIME: 'process',
    GATED_HTTP_PORT: '0',
    GATED_POLL_MS: '50',
    GATED_IDLE_TIMEOUT_MS: '400',
    GATED_LOG_LEVEL: 'silent',
    GATED_ADMIN_TOKEN: ADMIN_TOKEN,
  });
  const gated = await startGated({ config, log: silentLogger(), demo: true, channels: [] });
  running.push(gated);
  if (!gated.url) throw new Error('gated started without its HTTP server');
  return gated;
}

/** Every page, with what shows that it has loaded its data. */
function pages(runId: number): Array<{ name: string; path: string; ready: string }> {
  return [
    { name: 'chat', path: '/#demo', ready: '.pane .conn[data-state="live"]' },
    { name: 'dashboard', path: '/dashboard', ready: '#runs table' },
    { name: 'runs', path: '/dashboard#runs', ready: '#runs table' },
    { name: 'run', path: `/dashboard#run=${runId}`, ready: '#run-facts dl' },
    { name: 'chats', path: '/dashboard#chats', ready: '#chat-list table' },
    { name: 'tasks', path: '/dashboard/tasks', ready: '#tasks > *' },
    { name: 'memory', path: '/dashboard/memory', ready: '#facts > *' },
    { name: 'access', path: '/dashboard/access', ready: '#access-groups table' },
    { name: 'approvals', path: '/dashboard/approvals', ready: '#pending > *' },
    { name: 'workflows', path: '/dashboard/workflows', ready: '#runs > *' },
    { name: 'waiting', path: '/dashboard/waiting', ready: '#waiting > *' },
  ];
}

/** The navigation as the reader sees it: [text, href] of each link, and how many are marked current. */
function navOf(page: Page): Promise<{ links: string[][]; current: number }> {
  return page.evaluate(`(() => ({
    links: [...document.querySelectorAll('#site-nav a')].map((a) => [a.textContent, a.getAttribute('href')]),
    current: document.querySelectorAll('#site-nav a[aria-current="page"]').length,
  }))()`);
}

/**
 * How far the page reaches past the viewport (0: nothing to scroll sideways), and the first element that
 * sticks out (to say what to fix when it is not 0).
 */
function overflowOf(page: Page): Promise<{ px: number; culprit: string }> {
  return page.evaluate(`(() => {
    const doc = document.documentElement;
    const out = [...document.querySelectorAll('body *')].find(
      (e) => e.getBoundingClientRect().right > doc.clientWidth + 1,
    );
    return { px: doc.scrollWidth - doc.clientWidth, culprit: out ? out.tagName + ' #' + out.id + ' .' + out.className : '' };
  })()`);
}

/**
 * Pairs of visible boxes that cover one another by more than 2 px each way: elements that show text of
 * their own and controls, ancestors and their descendants aside, and the chart library's own layers.
 * Each pair as `tag#id.class "text"` twice, to say what to fix.
 */
function overlapsOf(page: Page): Promise<string[]> {
  return page.evaluate(`(() => {
    const CONTROLS = ['INPUT', 'BUTTON', 'TEXTAREA', 'SELECT', 'IMG', 'CANVAS'];
    const boxes = [];
    for (const e of document.querySelectorAll('body *')) {
      if (e.closest('.u-wrap, .u-legend')) continue;
      const ownText = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== '');
      if (!ownText && !CONTROLS.includes(e.tagName)) continue;
      const r = e.getBoundingClientRect();
      if (r.width < 1 || r.height < 1 || getComputedStyle(e).visibility === 'hidden') continue;
      boxes.push([e, r]);
    }
    const name = (e) =>
      e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ').join('.') : '') +
      ' "' + (e.textContent || e.value || '').trim().slice(0, 30) + '"';
    const out = [];
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, ra] = boxes[i];
        const [b, rb] = boxes[j];
        if (a.contains(b) || b.contains(a)) continue;
        const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
        const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
        if (w > 2 && h > 2) out.push(name(a) + ' × ' + name(b));
      }
    }
    return out.slice(0, 5);
  })()`);
}

describe('every page in chromium at 1280 and 390 px', () => {
  it('one navigation everywhere, no sideways scrolling on a phone, local times, one word per run state', async () => {
    const gated = await startWholeGated();
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);

    // A terminal (`gated chat demo`) spoke to the group first: its main session is shared, and says so.
    gated.gateway.sink({ chat_jid: 'local:demo', sender: 'op', content: 'from the terminal' });
    await until(
      () => gated.db.prepare(`SELECT 1 FROM session_log WHERE chat_jid = 'local:demo'`).get(),
      15_000,
      'the terminal chat run',
    );
    // One exchange with inline code, and a second topic: the chat shows both panes and the reply's code.
    await page.goto(`${gated.url}/#demo`);
    const main = page.locator('.pane[data-topic=""]');
    await main.locator('.conn[data-state="live"]').waitFor();
    await main.locator('.shared', { hasText: 'shares this session with local:demo' }).waitFor();
    await main.locator('textarea').fill('try `npm test` here 🚀');
    await main.locator('textarea').press('Enter');
    const answer = main.locator('.line.agent', { hasText: 'npm test' });
    await answer.waitFor({ timeout: 15_000 });
    const codeBg = await page.evaluate(
      `getComputedStyle(document.querySelector('.pane[data-topic=""] .line.agent code')).backgroundColor`,
    );
    expect(codeBg).not.toBe('rgba(0, 0, 0, 0)');
    await page.fill('#new-topic', 'support');
    await page.click('#add-topic button');
    const support = page.locator('.pane[data-topic="support"]');
    await support.locator('.conn[data-state="live"]').waitFor();
    // The support topic is a session of its own: nobody else is in it.
    expect(await support.locator('.shared').isHidden()).toBe(true);
    const heads = await page
      .locator('.pane-head')
      .evaluateAll((hs) => hs.map((h) => h.getBoundingClientRect()));
    expect(heads).toHaveLength(2);
    expect(heads[0]!.height).toBe(heads[1]!.height);
    expect(heads[0]!.top).toBe(heads[1]!.top);

    // The run ends after its idle timeout: the dashboard then shows an ended run.
    const runId = await until(
      () => gated.db.prepare('SELECT id FROM session_log WHERE result IS NOT NULL').pluck().get() as number,
      15_000,
      'the run to end',
    );

    let nav: string[][] | undefined;
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width > 600 ? 860 : 844 });
      for (const p of pages(runId)) {
        await page.goto(`${gated.url}${p.path}`);
        await page.locator(p.ready).first().waitFor();
        const seen = await navOf(page);
        nav ??= seen.links;
        expect(seen.links, `${p.name} at ${width}`).toEqual(nav);
        expect(seen.current, `${p.name} at ${width}: one link marked current`).toBe(1);
        if (width === 390) {
          const { px, culprit } = await overflowOf(page);
          expect(px, `${p.name} at 390 px is ${px} px too wide (${culprit})`).toBe(0);
        }
        expect(await overlapsOf(page), `${p.name} at ${width}: nothing covers anything`).toEqual([]);
        await page.screenshot({ path: screenshotPath(`page-${p.name}-${width}.png`) });
      }
    }
    expect(nav!.map(([text]) => text)).toEqual([
      'dashboard',
      'runs',
      'chats',
      'tasks',
      'memory',
      'access',
      'approvals',
      'workflows',
      'waiting',
      'web chat',
    ]);

    await page.setViewportSize({ width: 1280, height: 860 });
    // Times are the reader's local clock with the stored ISO value on hover; run states use one vocabulary.
    await page.goto(`${gated.url}/dashboard`);
    const started = page.locator('#runs tbody tr time').first();
    await started.waitFor();
    const iso = (await started.getAttribute('datetime'))!;
    expect(await started.getAttribute('title')).toBe(iso);
    expect(await started.textContent()).not.toContain('T');
    expect(Date.parse(iso)).toBeGreaterThan(Date.now() - 600_000);
    const states = await page.locator('#runs tbody .tag.run').allTextContents();
    expect(states.length).toBeGreaterThan(0);
    for (const s of states) expect(['running', 'idle', 'ok', 'error', 'timeout', 'stopped']).toContain(s);
    // A run's time is in the same words as its states: worked, then idle (waiting for a follow-up).
    const runHeadings = await page.locator('#runs thead th').allTextContents();
    expect(runHeadings).toEqual(expect.arrayContaining(['state', 'worked', 'idle']));
    expect(runHeadings.join(' ')).not.toMatch(/duration|lifetime/);

    // The tokens and cost an agent reported are in the run list (the example agent reports none).
    gated.db
      .prepare(
        'UPDATE session_log SET input_tokens = 12500, output_tokens = 340, cost_usd = 0.00016 WHERE id = ?',
      )
      .run(runId);
    await page.reload();
    // The run list is filled by the page's script after load: wait for this run's row before reading it.
    const row = page.locator('#runs tbody tr', { has: page.locator(`a[href="#run=${runId}"]`) });
    await row.waitFor();
    const runHeads = await page.locator('#runs thead th').allTextContents();
    const cells = await row.locator('td').allTextContents();
    expect(cells[runHeads.indexOf('tokens in/out')]).toBe('12,500 / 340');
    expect(cells[runHeads.indexOf('cost')]).toBe('$0.00016');

    // Once every run has ended, no panel counts an agent any more (the lanes gauge follows at once).
    await until(
      () => gated.db.prepare('SELECT count(*) FROM session_log WHERE result IS NULL').pluck().get() === 0,
      15_000,
      'every run to end',
    );
    await page.reload();
    await page
      .locator('#panel-cluster p', { hasText: '0 with an agent (running or idle)' })
      .waitFor({ state: 'attached' });
    // A swarm's panel: under the process runtime it stays hidden (issue 43 UI pass).
    expect(await page.locator('section:has(#panel-cluster)').isHidden()).toBe(true);
    expect(await page.locator('#lanes').textContent()).toContain('no lane is running or waiting');

    // The tasks page keeps a margin from the screen's edge.
    await page.goto(`${gated.url}/dashboard/tasks`);
    const box = (await page.locator('#tasks-section').boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(8);
    expect(errors).toEqual([]);
  });

  it("sets a group's busy mode from the groups table once the admin token is typed, audited as the dashboard", async () => {
    const gated = await startWholeGated();
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${gated.url}/dashboard`);
    await page.locator('#groups table').waitFor();
    const busyOf = () =>
      gated.db.prepare(`SELECT busy FROM registered_groups WHERE folder = 'demo'`).pluck().get();
    expect(await page.locator('#groups select').count()).toBe(0);
    await page.fill('#token', ADMIN_TOKEN);
    await page.press('#token', 'Enter');
    const choice = page.locator('#groups select[data-folder="demo"]');
    await choice.waitFor();
    expect(await choice.inputValue()).toBe('queue');
    await choice.selectOption('steer');
    await until(() => busyOf() === 'steer', 10_000, 'the busy mode set from the page');
    expect(
      gated.db
        .prepare(`SELECT actor FROM audit WHERE subject = 'registered_groups' AND action = 'update'`)
        .pluck()
        .all(),
    ).toEqual(['dashboard:admin-token']);
    await until(async () => (await choice.inputValue()) === 'steer', 10_000, 'the page showing steer');
    expect(errors).toEqual([]);
  });
});
