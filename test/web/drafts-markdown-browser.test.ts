/**
 * Drafts and tables in the web chat, in Chromium: the Claude agent (process runtime) streams a Markdown
 * answer from the local Messages API in small pieces; every draft the page shows is rendered (a heading, bold,
 * a code block), never raw `**`, `##` or a fence, and the answer's table is a real table.
 */
import type { Page } from 'playwright-core';
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

/** Records every distinct draft the page showed (text and markup), as the DOM changed. */
async function recordDrafts(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    const seen = (window.drafts = []);
    new MutationObserver(() => {
      for (const n of document.querySelectorAll('.line.draft .texts')) {
        const d = { text: n.textContent || '', html: n.innerHTML };
        if (d.text && seen[seen.length - 1]?.html !== d.html) seen.push(d);
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  })()`);
}

test(
  'drafts are rendered Markdown at every cut; the answer shows its table as a table',
  { timeout: 120_000 },
  async () => {
    chat = await startClaudeChat(api, { http: true });
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${chat.gated.url}/#${chat.group}`);
    const pane = page.locator('.pane[data-topic=""]');
    await pane.locator('.conn[data-state="live"]').waitFor({ timeout: 20_000 });
    await recordDrafts(page);
    await pane.locator('textarea').fill('MARKDOWN please');
    await pane.locator('textarea').press('Enter');
    await pane.locator('.line.draft h4').waitFor({ timeout: 60_000 });
    // For the picture: the draft once its table came, when a draft caught it (the screenshot only).
    await pane
      .locator('.line.draft table')
      .waitFor({ timeout: 5000 })
      .catch(() => undefined);
    await page.screenshot({ path: screenshotPath('chat-markdown-draft.png') });
    const answer = pane.locator('.line.agent:not(.draft)', { hasText: 'That is all.' });
    await answer.waitFor({ timeout: 60_000 });

    const drafts = (await page.evaluate('window.drafts')) as Array<{ text: string; html: string }>;
    expect(drafts.length).toBeGreaterThanOrEqual(2);
    for (const d of drafts) expect(d.text, d.html).not.toMatch(/\*\*|^#|```/m);
    expect(drafts.some((d) => d.html.includes('<h4>Answer #1</h4>'))).toBe(true);
    expect(drafts.some((d) => /<strong>bold/.test(d.html))).toBe(true);

    // The answer: a heading, a table with its header and aligned number column, a code block.
    expect(await answer.locator('h4').textContent()).toBe('Answer #1');
    expect(await answer.locator('table th').allTextContents()).toEqual(['name', 'value']);
    expect(await answer.locator('table tbody tr').count()).toBe(2);
    expect(await answer.locator('table tbody td').nth(3).getAttribute('style')).toContain(
      'text-align: right',
    );
    expect(await answer.locator('pre code').textContent()).toBe('const x = 1 < 2 && 3 > 2;');
    expect(await answer.textContent()).not.toMatch(/\*\*|\|---/);
    await answer.screenshot({ path: screenshotPath('chat-markdown-table.png') });
    expect(errors).toEqual([]);
  },
);
