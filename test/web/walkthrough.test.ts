/**
 * docs/APPROVALS.md's "Try it", followed as written by a newcomer in Chromium (issue 43): the commands are
 * read from that section, so the test fails when the docs and the product part. A visitor of the demo asks
 * for a tool call, is refused on Approve and told who they are and the command that makes them an owner;
 * once it has run, the same button decides. A second visitor watches: each sees the other's lines under
 * the other's name, and their own as "you".
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { startDemoGated } from '../helpers/gated.js';
import { gatedCli } from '../helpers/cli.js';
import { launchChromium, strictPage } from './chromium.js';

/** The steps of "Try it": the sqlite3 command of step 2 and the message of step 3, as the docs write them. */
function tryIt(): { rule: string; message: string } {
  const doc = readFileSync(packageFile('docs', 'APPROVALS.md'), 'utf8');
  const section = doc.slice(doc.indexOf('\n## Try it'));
  const rule = /```\n\s*(sqlite3 data\/gated\.db "[^\n]+")\n\s*```/.exec(section)?.[1];
  const message = /send `(!tool [^`]+)`/.exec(section)?.[1];
  if (!rule || !message)
    throw new Error('docs/APPROVALS.md has no "Try it" with a sqlite3 rule and a !tool message');
  return { rule, message };
}

it('the approvals walk-through works as written: refused, told how to become an owner, then approved', async () => {
  const steps = tryIt();
  const g = await startDemoGated({ GATED_IDLE_TIMEOUT_MS: '300' });
  const config = g.config;
  // Step 2 as the docs write it, with this test's database for the checkout's data/gated.db.
  execFileSync('bash', ['-c', steps.rule.replace('data/gated.db', `'${config.db}'`)]);

  const browser = await launchChromium();
  const newcomer = await strictPage(browser);
  const watcher = await strictPage(browser);
  for (const p of [newcomer, watcher]) {
    await p.page.goto(`${g.url}/#demo`);
    await p.page.locator('.pane[data-topic=""] .conn[data-state="live"]').waitFor();
  }
  const pane = newcomer.page.locator('.pane[data-topic=""]');
  const other = watcher.page.locator('.pane[data-topic=""]');
  const me = ((await newcomer.page.locator('#me').textContent()) ?? '').replace(/^you are /, '');
  expect(me).toMatch(/^web:v[0-9a-f]{20}$/);

  // Step 3: the question with its buttons.
  await pane.locator('textarea').fill(steps.message);
  await pane.locator('textarea').press('Enter');
  const question = pane.locator('.line.status', { hasText: 'The agent wants to run Bash' });
  await question.locator('.approval[data-state="pending"] button.approve').waitFor({ timeout: 20_000 });
  // Each visitor's lines under their own name: "you" for oneself, the other's id for the watcher.
  expect(await pane.locator('.line.user', { hasText: steps.message }).locator('.who').textContent()).toBe(
    'you',
  );
  const shown = other.locator('.line.user', { hasText: steps.message }).locator('.who');
  await shown.waitFor({ timeout: 10_000 });
  expect(await shown.textContent()).toBe(`${me.slice('web:'.length, 'web:'.length + 7)}…`);

  // Step 4: refused, with who they are and the command.
  await question.locator('button.approve').click();
  const refusal = pane.locator('.line', { hasText: 'you may not approve' });
  await refusal.waitFor({ timeout: 15_000 });
  const text = (await refusal.textContent()) ?? '';
  expect(text).toContain(`you are ${me}`);
  const command = /'gated (access add demo \S+ --role owner)'/.exec(text)?.[1];
  expect(command).toBe(`access add demo ${me} --role owner`);

  // Step 5: the operator runs it; step 6: the same button now decides.
  expect((await gatedCli(config.db, ...command!.split(' '))).code).toBe(0);
  await question.locator('button.approve').click();
  await question.locator('.approval[data-state="approved"]').waitFor({ timeout: 15_000 });
  const ran = /answers `(tool Bash ran:\s+[^`]+)`/.exec(
    readFileSync(packageFile('docs', 'APPROVALS.md'), 'utf8'),
  )?.[1];
  expect(ran).toBeDefined();
  await pane.locator('.line', { hasText: ran!.replace(/\s+/g, ' ') }).waitFor({ timeout: 20_000 });
  expect(readFileSync(join(config.groupsDir, 'demo', '.tool-runs.log'), 'utf8').trim()).toBe(
    'Bash {"command":"make deploy"}',
  );
  expect([...newcomer.errors, ...watcher.errors]).toEqual([]);
}, 90_000);
