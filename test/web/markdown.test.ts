import { expect, it } from 'vitest';
import { startDemoGated } from '../helpers/gated.js';
import { launchChromium, strictPage } from './chromium.js';

it(
  'renders an agent reply as Markdown in chromium, and no HTML from it runs',
  { timeout: 90_000 },
  async () => {
    const gated = await startDemoGated({ GATED_IDLE_TIMEOUT_MS: '500' });
    const browser = await launchChromium();
    try {
      const { page, errors } = await strictPage(browser);
      await page.goto(`${gated.url}/#demo`);
      const main = page.locator('.pane[data-topic=""]');
      await main.locator('.conn[data-state="live"]').waitFor();
      // The example agent echoes it back: the reply is the hostile Markdown.
      const hostile =
        '**bold** and `code` <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> ' +
        '[bad](javascript:window.__pwned=3) [good](https://example.org/)\n\n- one\n- two';
      await main.locator('textarea').fill(hostile);
      await main.locator('textarea').press('Enter');
      const reply = main.locator('.line.agent').last();
      await reply.locator('strong', { hasText: 'bold' }).waitFor({ timeout: 20_000 });
      expect(await reply.locator('code').first().textContent()).toBe('code');
      expect(await reply.locator('li').allTextContents()).toEqual(['one', 'two']);
      expect(await reply.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href')))).toEqual([
        'https://example.org/',
      ]);
      expect(await reply.locator('img, script').count()).toBe(0);
      expect(await reply.textContent()).toContain('<script>window.__pwned=2</script>');
      expect(await page.evaluate('window.__pwned')).toBeUndefined();
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  },
);
