import { describe, expect, it } from 'vitest';
import { endedRunOf, startDemoGated } from '../helpers/gated.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

/** The agent of test/agents/slow-agent.mjs: 300 ms per turn. */
const SLOW_AGENT_CMD = 'node "$GATED_HOME/test/agents/slow-agent.mjs" 300';
const IDLE_TIMEOUT_MS = 1000;

interface RunTimes {
  duration_ms: number;
  work_ms: number;
  idle_ms: number;
}

/** The run list's "3.2 s" / "450 ms" (web/common.js age). */
function age(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A run page's "1.05 s" / "450 ms" (web/run-view.js precise): to the hundredth below a minute. */
function precise(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

describe("a run's time split into work and idle", () => {
  it('a 300 ms turn and a 1 s idle timeout: worked ≈ 0.3 s and idle ≈ 1 s, in the API and on the pages', async () => {
    const gated = await startDemoGated({
      GATED_AGENT_CMD: SLOW_AGENT_CMD,
      GATED_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
    });
    const id = gated.gateway.sink({ chat_jid: 'web:demo', sender: 'me', content: 'take your time' })!;
    const { id: runId } = await endedRunOf(gated, id, 20_000);
    const listed = (await (await fetch(`${gated.url}/api/dashboard/runs`)).json()) as {
      runs: Array<RunTimes & { id: number; result: string }>;
    };
    const run = listed.runs.find((r) => r.id === runId)!;
    expect(run.result).toBe('ok');
    // Work: the agent's start (Node: 0.2 s on a quiet machine, measured up to 0.5 s with the suite running
    // beside it; 1.5 s allowed) and its 300 ms turn, nothing of the idle second.
    expect(run.work_ms).toBeGreaterThanOrEqual(300);
    expect(run.work_ms).toBeLessThan(300 + 1500);
    // Idle: the idle timeout, and the agent's exit once its stdin closed.
    expect(run.idle_ms).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS);
    expect(run.idle_ms).toBeLessThan(IDLE_TIMEOUT_MS + 500);
    expect(run.work_ms + run.idle_ms).toBe(run.duration_ms);
    const view = (await (await fetch(`${gated.url}/api/dashboard/run/${runId}`)).json()) as {
      timings: RunTimes;
    };
    expect(view.timings).toMatchObject({
      duration_ms: run.duration_ms,
      work_ms: run.work_ms,
      idle_ms: run.idle_ms,
    });

    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.goto(`${gated.url}/dashboard`);
    const row = page.locator('#runs tbody tr', { has: page.locator(`a[href="#run=${runId}"]`) });
    await row.waitFor();
    const heads = await page.locator('#runs thead th').allTextContents();
    const cells = await row.locator('td').allTextContents();
    expect(cells[heads.indexOf('worked')]).toBe(age(run.work_ms));
    expect(cells[heads.indexOf('idle')]).toBe(age(run.idle_ms));
    // Each column says what it counts.
    const hint = (name: string) =>
      page.locator('#runs thead th', { hasText: new RegExp(`^${name}$`) }).getAttribute('title');
    expect(await hint('worked')).toContain('its last answer');
    expect(await hint('idle')).toContain('idle timeout');

    await page.goto(`${gated.url}/dashboard#run=${runId}`);
    const fact = (name: string) => page.locator(`#run-facts dd[data-field="${name}"]`);
    await fact('lifetime').waitFor();
    expect(await fact('worked').textContent()).toMatch(
      new RegExp(`^${precise(run.work_ms)} agent start → its last answer`),
    );
    expect(await fact('idle').textContent()).toMatch(new RegExp(`^${precise(run.idle_ms)} after answering`));
    expect(await fact('lifetime').textContent()).toBe(
      `${precise(run.duration_ms)} agent start → exit: worked + idle`,
    );
    await page.screenshot({ path: screenshotPath('run-time.png'), fullPage: true });
    expect(errors).toEqual([]);
  }, 60_000);
});
