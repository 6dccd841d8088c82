import { afterEach, describe, expect, it } from 'vitest';
import { benchInstance, externalWriter } from '../../bench/pipeline.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';

type Instance = Awaited<ReturnType<typeof benchInstance>>;
const open: Instance[] = [];
afterEach(async () => {
  while (open.length) await open.pop()!.close();
});

const GROUPS = 8;
const PER_GROUP = 15;

/** A gated filled the way the burst benchmark fills one: an external writer, the awk agent, every reply. */
async function filledInstance(): Promise<Instance> {
  const inst = await benchInstance({
    groups: GROUPS,
    maxConcurrent: 3,
    idleMs: 300,
    pollMs: 100,
    history: { flushMs: 60_000 },
    http: true,
  });
  open.push(inst);
  await externalWriter(inst.dbPath, GROUPS, PER_GROUP);
  await inst.channel.waitFor(GROUPS * PER_GROUP, 60_000);
  expect(inst.channel.deliveries.size).toBe(GROUPS * PER_GROUP);
  // Store the minutes that have closed; the page adds what is newer live.
  inst.gated.history!.flush(Date.now());
  return inst;
}

describe('dashboard views in chromium on a burst-filled database', () => {
  it('charts, a chat and a run show the figures the database holds', async () => {
    const inst = await filledInstance();
    const db = inst.gated.db;
    const count = (sql: string, ...args: unknown[]) =>
      db
        .prepare(sql)
        .pluck()
        .get(...args) as number;
    // Idle agents end their runs soon after the last reply: wait until none is open, so counts are final.
    await until(
      () => count(`SELECT count(*) FROM session_log WHERE result IS NULL`) === 0,
      10_000,
      'every run ended',
    );
    const inbound = count(`SELECT count(*) FROM messages WHERE is_from_me = 0`);
    const delivered = count(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'sent'`);
    const runs = count(`SELECT count(*) FROM session_log WHERE ended_at IS NOT NULL`);
    expect(inbound).toBe(GROUPS * PER_GROUP);

    const browser = await launchChromium();
    const { page, errors } = await strictPage(browser);
    await page.setViewportSize({ width: 1280, height: 900 });
    const url = inst.gated.url!;

    // Charts: each head figure equals the SQL count over the same rows.
    await page.goto(`${url}/dashboard`);
    const total = (chart: string) => page.locator(`#chart-${chart} .total[data-value]`);
    await total('in-platform').waitFor();
    await page.locator('#chart-runs .u-wrap canvas').first().waitFor();
    expect(Number(await total('in-platform').getAttribute('data-value'))).toBe(inbound);
    expect(Number(await total('in-outcome').getAttribute('data-value'))).toBe(inbound);
    expect(Number(await total('out').getAttribute('data-value'))).toBe(delivered);
    expect(Number(await total('runs').getAttribute('data-value'))).toBe(runs);
    // A run's time: the worst worked and idle of the runs, as session_log has them.
    const times = db
      .prepare(`SELECT started_at, ended_at, idle_ms FROM session_log WHERE idle_ms IS NOT NULL`)
      .all() as Array<{ started_at: string; ended_at: string; idle_ms: number }>;
    expect(times.length).toBe(runs);
    const lifetime = (r: (typeof times)[0]) => Date.parse(r.ended_at) - Date.parse(r.started_at);
    await page.locator('#chart-work-ms .u-wrap canvas').first().waitFor();
    expect(Number(await total('work-ms').getAttribute('data-value'))).toBe(
      Math.max(...times.map((r) => lifetime(r) - r.idle_ms)),
    );
    expect(Number(await total('idle-ms').getAttribute('data-value'))).toBe(
      Math.max(...times.map((r) => r.idle_ms)),
    );
    expect(await page.locator('#chart-in-platform .u-legend').textContent()).toContain('bench');
    // Without a cursor on the chart, the legend shows the latest values, not "--" (issue 43).
    const legend = (await page.locator('#chart-in-platform .u-legend').textContent()) ?? '';
    expect(legend).not.toContain('--');
    expect(await page.locator('#history-kept').textContent()).toMatch(/^per minute, kept for \d+ days$/);
    await page.locator('#history-section').screenshot({ path: screenshotPath('charts.png') });

    // Chat view: a chat's inbound and outbound rows, then a search by text.
    const chat = 'bench:g3';
    await page.goto(`${url}/dashboard#chat=${encodeURIComponent(chat)}`);
    const rows = count(`SELECT count(*) FROM messages WHERE chat_jid = ?`, chat);
    await page.locator(`#chat-count[data-count="${rows}"]`).waitFor();
    expect(await page.locator('#chat-messages .msg.in').count()).toBe(
      count(`SELECT count(*) FROM messages WHERE chat_jid = ? AND is_from_me = 0`, chat),
    );
    expect(await page.locator('#chat-messages .msg.out .tag.delivery.sent').count()).toBe(
      count(
        `SELECT count(*) FROM messages WHERE chat_jid = ? AND is_from_me = 1 AND delivery = 'sent'`,
        chat,
      ),
    );
    expect(await page.locator('#chat-messages .msg.in .tag.state.done').count()).toBe(
      count(`SELECT count(*) FROM messages WHERE chat_jid = ? AND is_from_me = 0 AND state = 'done'`, chat),
    );
    await page.locator('#chat-list tr.chat.current', { hasText: chat }).waitFor();
    await page.screenshot({ path: screenshotPath('chat-view.png'), fullPage: true });
    const token = (await page.locator('#chat-messages .msg.in .text').first().textContent())!.trim();
    await page.fill('#chat-text', token);
    await page.click('#chat-filter button');
    const hits = count(
      `SELECT count(*) FROM messages WHERE chat_jid = ? AND content LIKE ?`,
      chat,
      `%${token}%`,
    );
    await page.locator(`#chat-count[data-count="${hits}"]`).waitFor();
    expect(hits).toBeGreaterThan(0);

    // Run view, reached from a message's run link: its messages, replies and result.
    await page.locator('#chat-messages .msg.in .run-link').first().click();
    await page.locator('#run-facts dd[data-field="result"]').waitFor();
    const runId = Number(new URL(page.url()).hash.slice('#run='.length));
    const run = db.prepare(`SELECT * FROM session_log WHERE id = ?`).get(runId) as Record<string, unknown>;
    expect(await page.locator('#run-facts dd[data-field="result"]').textContent()).toBe(run.result);
    expect(await page.locator('#run-facts dd[data-field="messages"]').textContent()).toBe(
      String(run.messages),
    );
    const served = count(`SELECT count(*) FROM messages WHERE run_id = ?`, runId);
    const replies = count(
      `SELECT count(*) FROM messages WHERE is_from_me = 1 AND reply_to_id IN (SELECT id FROM messages WHERE run_id = ?)`,
      runId,
    );
    await page.locator(`#run-messages[data-count="${served + replies}"]`).waitFor();
    expect(await page.locator('#run-messages .msg.in').count()).toBe(served);
    // Its tool calls as a timeline by turn (rows as the recorder writes them), shown once the view reloads.
    const t0 = Date.parse(String(run.started_at));
    const call = db.prepare(
      `INSERT INTO tool_calls (run_id, turn, call_id, tool, input, input_bytes, input_sha256, decision, decided_by,
         started_at, decided_at, ended_at, output_bytes, error)
       VALUES (?, ?, ?, ?, ?, 1, 'x', ?, 'rules', ?, ?, ?, ?, ?)`,
    );
    call.run(runId, 1, 'a1', 'Bash', '{"command":"ls"}', 'allow', t0 + 10, t0 + 10, t0 + 30, 5, null);
    call.run(
      runId,
      2,
      'a2',
      'Bash',
      '{"command":"rm -rf /"}',
      'deny',
      t0 + 40,
      t0 + 40,
      t0 + 40,
      null,
      'denied',
    );
    await page.reload();
    await page.locator('#run-calls[data-count="2"]').waitFor();
    expect(await page.locator('#run-calls h3').allTextContents()).toEqual(['turn 1', 'turn 2']);
    expect(await page.locator('#run-calls li.call.bad').count()).toBe(1);
    await page.screenshot({ path: screenshotPath('run-view.png'), fullPage: true });
    expect(errors).toEqual([]);
  }, 120_000);
});
