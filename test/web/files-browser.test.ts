/**
 * Drafts and files in the real web chat, in chromium, against the whole gated with an agent that behaves
 * like a real one (test/agents/files-agent.mjs: slow, streaming partial blocks, reading and writing files
 * in its folder). Screenshots of a growing draft and of files are written by screenshotPath (chromium.ts).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { FILES_AGENT_CMD, startDemoGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

async function startWithFilesAgent(): Promise<{ gated: Gated; groupsDir: string }> {
  const gated = await startDemoGated({ GATED_AGENT_CMD: FILES_AGENT_CMD, GATED_IDLE_TIMEOUT_MS: '3000' });
  if (!gated.url) throw new Error('gated started without its HTTP server');
  return { gated, groupsDir: gated.config.groupsDir };
}

/**
 * Records every distinct text the draft bubble showed, as the DOM changed (not by sampling). Page code as
 * a string: the tests compile without the DOM's types.
 */
async function recordDrafts(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    const seen = (window.drafts = []);
    new MutationObserver(() => {
      for (const n of document.querySelectorAll('.line.draft .text')) {
        const t = n.textContent || '';
        if (t && seen[seen.length - 1] !== t) seen.push(t);
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  })()`);
}

const draftsSeen = (page: Page) => page.evaluate('window.drafts') as Promise<string[]>;

/** A w×h RGB PNG with a colour gradient: a photo a person could tell apart from another. */
function gradientPng(w: number, h: number): Buffer {
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    const row = y * (w * 3 + 1);
    for (let x = 0; x < w; x++) {
      raw[row + 1 + x * 3] = Math.round((255 * x) / w);
      raw[row + 2 + x * 3] = Math.round((255 * y) / h);
      raw[row + 3 + x * 3] = 160;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const sig = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([
    sig,
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function crc32(buf: Buffer): number {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return ~c >>> 0;
}

describe('drafts and files in the web chat, in chromium', () => {
  it('a streamed turn grows one draft in place and ends as exactly one final text, also across a reload', async () => {
    const { gated } = await startWithFilesAgent();
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${gated.url}/#demo`);
    const main = page.locator('.pane[data-topic=""]');
    await main.locator('.conn[data-state="live"]').waitFor();
    await recordDrafts(page);

    await main.locator('textarea').fill('stream 4');
    await main.locator('textarea').press('Enter');
    await main.locator('.line.draft', { hasText: 'word1 word2' }).waitFor({ timeout: 15_000 });
    await page.screenshot({ path: screenshotPath('chat-draft.png') });
    const final = 'final: word1 word2 word3 word4 done';
    await main.locator('.line.agent', { hasText: final }).waitFor({ timeout: 20_000 });
    await main.locator('.line.draft').waitFor({ state: 'detached' });

    const seen = await draftsSeen(page);
    // The draft grew in place: at least 3 distinct texts, each the previous one plus more.
    expect(seen.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.startsWith(seen[i - 1]!)).toBe(true);
    expect(seen.every((t) => !t.includes('final'))).toBe(true);
    expect(await main.locator('.line', { hasText: final }).count()).toBe(1);
    expect(await main.locator('.line.draft').count()).toBe(0);
    // Drafts are not replies: the turn stored one reply only.
    const replies = gated.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = 'web:demo'`)
      .pluck()
      .all();
    expect(replies).toEqual([final]);

    // A reload in the middle of a turn shows the draft as it is now, then the answer once.
    await main.locator('textarea').fill('stream 5');
    await main.locator('textarea').press('Enter');
    await main.locator('.line.draft', { hasText: 'word1 word2' }).waitFor({ timeout: 15_000 });
    await page.reload();
    const again = page.locator('.pane[data-topic=""]');
    await again.locator('.line.draft', { hasText: 'word1 word2' }).waitFor({ timeout: 10_000 });
    const final5 = 'final: word1 word2 word3 word4 word5 done';
    await again.locator('.line.agent', { hasText: final5 }).waitFor({ timeout: 20_000 });
    await again.locator('.line.draft').waitFor({ state: 'detached' });
    expect(await again.locator('.line', { hasText: final5 }).count()).toBe(1);
    expect(await again.locator('.line', { hasText: final }).count()).toBe(1);
    expect(errors).toEqual([]);
  }, 120_000);

  it('a photo uploaded in the page reaches the agent in its folder; the agent’s files show in the chat and after a reload', async () => {
    const { gated, groupsDir } = await startWithFilesAgent();
    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${gated.url}/#demo`);
    const main = page.locator('.pane[data-topic=""]');
    await main.locator('.conn[data-state="live"]').waitFor();

    const photo = gradientPng(320, 200);
    const sha = createHash('sha256').update(photo).digest('hex').slice(0, 12);
    await main.locator('input[type=file]').setInputFiles({
      name: 'holiday photo.png',
      mimeType: 'image/png',
      buffer: photo,
    });
    await main.locator('textarea').fill('what is in this picture?');
    await main.locator('textarea').press('Enter');
    const saw = main.locator('.line.agent', { hasText: `saw holiday_photo.png ${photo.length} ${sha}` });
    await saw.waitFor({ timeout: 20_000 });
    // Without a reload, the line's "(uploading)" has become the picture itself (the stream's file event).
    await main.locator('.line.user img[alt="holiday_photo.png"]').waitFor({ timeout: 10_000 });
    await expectLoaded(page, '.line.user img[alt="holiday_photo.png"]');
    expect(await main.locator('.line.user .file.pending').count()).toBe(0);
    // The agent read the file at the path it was given, relative to its folder: the same bytes.
    const id = gated.db
      .prepare(`SELECT id FROM messages WHERE is_from_me = 0 AND content = 'what is in this picture?'`)
      .pluck()
      .get() as number;
    expect(await saw.textContent()).toContain(`at inbox/${id}/0-holiday_photo.png`);
    expect(
      readFileSync(join(groupsDir, 'demo', 'inbox', String(id), '0-holiday_photo.png')).equals(photo),
    ).toBe(true);

    // Files the agent names: an image shown inline, a text file offered as a download.
    await main.locator('textarea').fill('send chart.png');
    await main.locator('textarea').press('Enter');
    const chart = main.locator('.line.agent', { hasText: 'here is chart.png' });
    await chart.locator('img[alt="chart.png"]').waitFor({ timeout: 20_000 });
    await expectLoaded(page, '.line.agent img[alt="chart.png"]');
    await main.locator('textarea').fill('send notes.txt');
    await main.locator('textarea').press('Enter');
    const notes = main.locator('.line.agent', { hasText: 'here is notes.txt' }).locator('a.file.download');
    await notes.waitFor({ timeout: 20_000 });
    const href = await notes.getAttribute('href');
    const download = await page.request.get(`${gated.url}${href}`);
    expect(download.status()).toBe(200);
    expect(await download.text()).toBe('contents of notes.txt\n');

    // The agent sends the user's photo back: shown inline, the same picture.
    await main.locator('textarea').fill(`send-path inbox/${id}/0-holiday_photo.png`);
    await main.locator('textarea').press('Enter');
    const back = main.locator('.line.agent', { hasText: 'sending that path' });
    await back.locator('img[alt="0-holiday_photo.png"]').waitFor({ timeout: 20_000 });
    await expectLoaded(page, '.line.agent img[alt="0-holiday_photo.png"]');
    expect(await back.locator('img').evaluate(natural)).toEqual([320, 200]);

    // After a reload the history shows both: the user's photo (saved now) and the agent's files.
    await page.reload();
    const after = page.locator('.pane[data-topic=""]');
    await after.locator('.line.user img[alt="holiday_photo.png"]').waitFor();
    await expectLoaded(page, '.line.user img[alt="holiday_photo.png"]');
    await after.locator('.line.agent img[alt="chart.png"]').waitFor();
    await after.locator('.line.agent a.file.download', { hasText: 'notes.txt' }).waitFor();
    await after.locator('.line.agent img[alt="0-holiday_photo.png"]').waitFor();
    await expectLoaded(page, '.line.agent img[alt="0-holiday_photo.png"]');
    await page.setViewportSize({ width: 1280, height: 1300 });
    await after.locator('.lines').evaluate((l) => {
      l.scrollTop = l.scrollHeight;
    });
    await page.screenshot({ path: screenshotPath('chat-files.png') });
    expect(errors).toEqual([]);
  }, 120_000);
});

/** An image element's natural size, [0, 0] until it has loaded. Runs in the page: self-contained. */
const natural = (i: unknown): [number, number] => {
  const img = i as { complete: boolean; naturalWidth: number; naturalHeight: number };
  return img.complete ? [img.naturalWidth, img.naturalHeight] : [0, 0];
};

/** Waits until the image has loaded with a size (a broken image has naturalWidth 0). */
async function expectLoaded(page: Page, selector: string): Promise<void> {
  const img = page.locator(selector).first();
  await until(async () => (await img.evaluate(natural))[0] > 0, 10_000, `${selector} loaded`);
}
