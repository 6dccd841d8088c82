import { describe, expect, it } from 'vitest';
import { launchChromium, strictPage } from './chromium.js';

/**
 * How many pixels of `text`, drawn with the page's default fonts on a canvas, are coloured (red, green and
 * blue apart). A colour emoji font draws in colour; a missing one leaves an empty box or nothing, in black.
 */
const colouredPixels = `(text) => {
  const c = document.createElement('canvas');
  c.width = 200; c.height = 60;
  const g = c.getContext('2d');
  g.font = '40px sans-serif';
  g.fillStyle = '#000';
  g.fillText(text, 4, 46);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const [r, gr, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
    if (a > 0 && Math.max(r, gr, b) - Math.min(r, gr, b) > 40) n++;
  }
  return n;
}`;

describe('emoji in the browser', { timeout: 60_000 }, () => {
  it('Chromium draws emoji in colour (the setup installs a colour emoji font), not as empty boxes', async () => {
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.setContent('<!doctype html><meta charset="utf-8"><body></body>');
    const count = (text: string) =>
      page.evaluate(`(${colouredPixels})(${JSON.stringify(text)})`) as Promise<number>;
    // Emoji agents and the UI use. (Faces such as U+1F600 come from DejaVu Sans, which has them in black:
    // a real glyph, not a box, so they are not in this list.)
    for (const emoji of ['👍', '✅', '🤖', '🎉', '🚀']) {
      expect(await count(emoji), `${emoji} drawn in colour`).toBeGreaterThan(50);
    }
    // Plain text and a character no font has (drawn as an empty box) stay black: the measure tells them apart.
    expect(await count('abc')).toBe(0);
    expect(await count('\u{10FFFD}')).toBe(0);
    expect(errors).toEqual([]);
  });
});
