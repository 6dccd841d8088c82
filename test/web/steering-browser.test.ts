/**
 * Drafts of a steered turn in the web chat, in Chromium (docs/PROTOCOL.md): the Claude agent (process runtime)
 * streams a long turn from the local Messages API into the page; after `/stop` and after `/interrupt` no
 * draft bubble and no "agent is working…" stays on the page, none comes back later (a throttled edit), and a
 * tab that reconnects (reloaded, or opened afresh) shows none either.
 */
import type { Locator, Page } from 'playwright-core';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { startClaudeChat, type ClaudeChat } from '../agents/claude-support.js';
import { MessagesApiServer } from '../infra/messages-api.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

let api: MessagesApiServer;
let chat: ClaudeChat | undefined;

beforeEach(async () => {
  api = await MessagesApiServer.start();
});

afterEach(async () => {
  await chat?.gated.close(5000);
  chat = undefined;
  await api.close();
});

/** The main pane of the chat, live. */
async function openPane(page: Page, c: ClaudeChat): Promise<Locator> {
  await page.goto(`${c.gated.url}/#${c.group}`);
  const pane = page.locator('.pane[data-topic=""]');
  await pane.locator('.conn[data-state="live"]').waitFor({ timeout: 20_000 });
  return pane;
}

async function say(pane: Locator, text: string): Promise<void> {
  await pane.locator('textarea').fill(text);
  await pane.locator('textarea').press('Enter');
}

/** A long turn streaming into the page: its draft bubble has grown at least once, the indicator is on. */
async function streaming(pane: Locator): Promise<void> {
  await say(pane, 'SLOW 40');
  const draft = pane.locator('.line.draft');
  await draft.filter({ hasText: 'line 0001 of the long answer' }).waitFor({ timeout: 60_000 });
  const first = (await draft.textContent())!.length;
  await expect
    .poll(async () => (await draft.textContent())?.length ?? 0, { timeout: 10_000 })
    .toBeGreaterThan(first);
  expect(await pane.locator('.typing').isVisible()).toBe(true);
}

/** Neither a draft bubble nor the working indicator, now and still after the draft throttle's interval. */
async function nothingStale(pane: Locator): Promise<void> {
  await expect.poll(() => pane.locator('.line.draft').count(), { timeout: 10_000 }).toBe(0);
  await expect.poll(() => pane.locator('.typing').isVisible(), { timeout: 10_000 }).toBe(false);
  // The draft throttle is 1 s: an edit planned before the end would show within it.
  await new Promise((r) => setTimeout(r, 2500));
  expect(await pane.locator('.line.draft').count()).toBe(0);
  expect(await pane.locator('.typing').isVisible()).toBe(false);
}

test(
  '/stop: the draft bubble and the working indicator go, and do not come back on reconnect',
  { timeout: 150_000 },
  async () => {
    chat = await startClaudeChat(api, { http: true });
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    const pane = await openPane(page, chat);
    await streaming(pane);
    await page.screenshot({ path: screenshotPath('steering-streaming.png') });

    await say(pane, '/stop');
    await pane.locator('.line', { hasText: 'stopped claude' }).waitFor({ timeout: 20_000 });
    await nothingStale(pane);
    expect(chat.gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);

    // A tab that reloads, and one opened afresh, start from what the server shows now: nothing.
    await page.reload();
    const again = page.locator('.pane[data-topic=""]');
    await again.locator('.conn[data-state="live"]').waitFor({ timeout: 20_000 });
    await again.locator('.line', { hasText: 'stopped claude' }).waitFor({ timeout: 10_000 });
    await nothingStale(again);
    const other = await strictPage(browser);
    await nothingStale(await openPane(other.page, chat));

    // The next turn drafts and answers as usual, once.
    await say(again, 'SAY after the stop');
    await again
      .locator('.line.agent:not(.draft)', { hasText: 'after the stop' })
      .waitFor({ timeout: 60_000 });
    await nothingStale(again);
    expect(await again.locator('.line.agent:not(.draft)', { hasText: 'after the stop' }).count()).toBe(1);
    expect([...errors, ...other.errors]).toEqual([]);
  },
);

test(
  '/interrupt: the interrupted draft ends as its answer, the next turn answers, nothing stays',
  { timeout: 150_000 },
  async () => {
    chat = await startClaudeChat(api, { http: true });
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    const pane = await openPane(page, chat);
    await streaming(pane);

    await say(pane, '/interrupt better idea');
    const answers = pane.locator('.line.agent:not(.draft)');
    await answers.filter({ hasText: 'echo: better idea' }).waitFor({ timeout: 60_000 });
    // The interrupted turn's answer is what it had streamed, shown once, before the new turn's answer.
    const cut = answers.filter({ hasText: 'line 0001 of the long answer' });
    expect(await cut.count()).toBe(1);
    // Marked as cut, in the page too.
    expect(await cut.textContent()).toMatch(/…\(interrupted\)\s*$/);
    const order = await answers.evaluateAll((lis) => lis.map((li) => li.textContent ?? ''));
    const cutAt = order.findIndex((t) => t.includes('line 0001'));
    expect(cutAt).toBeGreaterThanOrEqual(0);
    expect(cutAt).toBeLessThan(order.findIndex((t) => t.includes('echo: better idea')));
    await nothingStale(pane);
    await page.screenshot({ path: screenshotPath('steering-interrupted.png') });

    await page.reload();
    const again = page.locator('.pane[data-topic=""]');
    await again.locator('.conn[data-state="live"]').waitFor({ timeout: 20_000 });
    await again.locator('.line', { hasText: 'echo: better idea' }).waitFor({ timeout: 10_000 });
    await nothingStale(again);
    expect(await again.locator('.line.agent', { hasText: 'echo: better idea' }).count()).toBe(1);
    expect(chat.gated.db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(0);
    expect(errors).toEqual([]);
  },
);
