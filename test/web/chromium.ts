import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { chromium, type Browser, type BrowserServer, type Page } from 'playwright-core';

/** Debian's chromium, installed by scripts/setup.d/40-chromium.sh; never a downloaded browser build. */
export const CHROMIUM = '/usr/bin/chromium';

const open: Array<{ browser: Browser; server: BrowserServer }> = [];

afterEach(async () => {
  while (open.length) {
    const { browser, server } = open.pop()!;
    const pid = server.process().pid;
    await browser.close().catch(() => undefined);
    await server.close().catch(() => undefined);
    // close() waits for the browser to exit; if it hung, end it by its own pid, never by name.
    if (pid !== undefined && isAlive(pid)) process.kill(pid, 'SIGKILL');
  }
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Launches headless chromium with the flags this machine needs. Playwright gives it a fresh
 * --user-data-dir of its own and removes it on close. Fails (never skips) when chromium is missing.
 * `extraArgs` are more flags (a test's fake microphone, for one).
 */
export async function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run scripts/setup.d/40-chromium.sh (apt-get install chromium)`);
  }
  // launchServer (not launch) so the test knows the browser's pid and can make sure it is gone.
  const server = await chromium.launchServer({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      ...extraArgs,
    ],
  });
  const browser = await chromium.connect(server.wsEndpoint());
  open.push({ browser, server });
  return browser;
}

/** A page that fails the test on any uncaught page error or console error. */
export async function strictPage(browser: Browser): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  return { page, errors };
}

/**
 * Where a test writes the screenshot `name`: `$GATED_SCREENSHOTS_DIR`, else a folder under the system's temp
 * directory, never the tracked tree (a test run leaves `git status` clean). `npm run screenshots` runs the
 * browser tests into a fresh folder and copies the pictures the README links into docs/screenshots/.
 */
export function screenshotPath(name: string): string {
  const dir = process.env.GATED_SCREENSHOTS_DIR || join(tmpdir(), 'gated-screenshots');
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}
