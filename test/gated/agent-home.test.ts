/**
 * A process-runtime agent gets a HOME of its own (docs/QUEUE.md, "Runtimes"): the whole gateway with the
 * hostile agent (test/agents/hostile-agent.mjs), which reads a dotfile of $HOME and writes one there. The
 * operator's home (a decoy folder this test names as gated's HOME) is neither read nor changed; the agent's
 * HOME is `.home` in its group's folder, private to gated's user; a link the agent plants at that name for
 * its next run is replaced by a directory, not followed.
 */
import { existsSync, lstatSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, test, vi } from 'vitest';
import type { Gated } from '../../gated/app.js';
import { E2E_ENV, seedGroups } from '../channels/support.js';
import { tempDir } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

const CHAT = 'web:homely';
const SECRET = 'the operator’s dotfile, never to be read by an agent';

afterEach(() => {
  vi.unstubAllEnvs();
});

const said = (g: Gated) =>
  g.db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
    .pluck()
    .all(CHAT) as string[];

async function ask(g: Gated, content: string): Promise<string> {
  const before = said(g).length;
  g.gateway.sink({ chat_jid: CHAT, sender: 'mallory', content });
  await until(() => said(g).length > before, 15_000, `an answer to '${content}'`);
  return said(g)[before]!;
}

/** Waits until no run of the group is open, so the next message starts a new run. */
const runsEnded = (g: Gated) =>
  until(
    () => g.db.prepare(`SELECT count(*) FROM session_log WHERE result IS NULL`).pluck().get() === 0,
    15_000,
    'the run ended',
  );

test('the agent’s HOME is .home in its folder, never the operator’s: a dotfile there is not read, nothing is written there', async () => {
  const operatorHome = tempDir('gated-operator-home-');
  writeFileSync(join(operatorHome, '.secret'), SECRET);
  // gated's own HOME, as an operator's shell gives it: the agent must not inherit it.
  vi.stubEnv('HOME', operatorHome);
  const g = await startTestGated({
    http: false,
    env: { ...E2E_ENV, GATED_AGENT_CMD: `node "$GATED_HOME/test/agents/hostile-agent.mjs"` },
    seed: (db, config) => seedGroups(db, config.groupsDir, { groups: [['homely', 'Homely']], routes: [] }),
  });
  const home = join(g.config.groupsDir, 'homely', '.home');
  expect(await ask(g, 'home .secret')).toBe(`home=${home} .secret: absent`);
  expect(readdirSync(operatorHome)).toEqual(['.secret']);
  expect(existsSync(join(home, '.hostile-was-here'))).toBe(true);
  expect(lstatSync(home).mode & 0o777).toBe(0o700);

  // The agent plants .home as a link to the operator's home for its next run: the link is replaced.
  expect(await ask(g, `plant-home ${operatorHome}`)).toBe('planted home');
  await runsEnded(g);
  expect(lstatSync(home).isSymbolicLink()).toBe(true);
  expect(await ask(g, 'home .secret')).toBe(`home=${home} .secret: absent`);
  expect(lstatSync(home).isDirectory()).toBe(true);
  expect(readdirSync(operatorHome)).toEqual(['.secret']);
}, 60_000);
