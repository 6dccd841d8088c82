/**
 * vitest's globalSetup (vitest.config.ts), once per run before any test file:
 * - dist/ brought up to date with the sources (scripts/dist.mjs, as `npm start` does: a stat per source, an
 *   esbuild bundle of about 0.3 s when one changed). The tests that start the real CLI as a process run
 *   `node dist/gated/cli.js` (test/helpers/process.ts), a third of the CPU of `node --import tsx` on the
 *   sources; `npm start`'s own tests then find it built.
 * - One private temp folder for the whole run: TMPDIR points at it before the workers start, so every
 *   folder a test, a server it starts (dockerd, PostgreSQL, Chromium, the atproto network) or tsx makes in
 *   the system's temp folder lands there. After the run it is removed, and what was still in it is named on
 *   stderr (a test should clean up itself; this is the net under a test that failed halfway). Agents
 *   started by gated get a minimal environment without TMPDIR (queue/runtime/process.ts): what they leave
 *   in /tmp is their tests' business (test/agents/crash-support.ts).
 */
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { packageFile } from '../core/paths.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
// @ts-expect-error: a plain script of this repository, without types
import { ensureDist } from '../scripts/dist.mjs';

/**
 * What is in the checkout's own `data/` folder (gated's default database, groups and configuration
 * folders): a test must never write there, since it would be the operator's, and a later run (or `npm
 * start`) reads it. Listed before and after the run; anything new fails the run, named.
 */
function dataEntries(): Set<string> {
  const out = new Set<string>();
  const list = (rel: string) => {
    try {
      return readdirSync(packageFile(rel));
    } catch {
      return [];
    }
  };
  for (const top of list('data')) {
    out.add(`data/${top}`);
    for (const below of list(`data/${top}`)) out.add(`data/${top}/${below}`);
  }
  return out;
}

export default async function setup(project: TestProject): Promise<() => void> {
  await ensureDist();
  const dataBefore = dataEntries();
  // vitest's watch mode: sources edited between reruns are compiled again before the rerun.
  project.onTestsRerun(async () => {
    await ensureDist();
  });
  // A short name: it lengthens every path below it, and some must stay short. The Codex agent's socket
  // folder goes in its HOME (the group's folder) only while that path stays under 90 characters, else in
  // /tmp (agents/codex/bridge.mjs), where a run killed with -9 then leaves it.
  const root = mkdtempSync(join(tmpdir(), 'gt-'));
  // Servers the tests start as other users (PostgreSQL, an agent's own uid) make their folders here too.
  chmodSync(root, 0o1777);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = root;
  return () => {
    const written = [...dataEntries()].filter((e) => !dataBefore.has(e));
    if (written.length > 0) {
      // A thrown error here is printed but does not fail vitest's run: the exit status says it.
      process.stderr.write(
        `test run: FAILED: tests wrote into the checkout's data/ folder (gated's defaults): ${written.sort().join(', ')}; ` +
          'a test must give gated its own GATED_DB, GATED_GROUPS_DIR and GATED_CONFIG_DIR\n',
      );
      process.exitCode = 1;
    }
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    let left: string[] = [];
    try {
      // tsx's cache of compiled modules (tsx-<uid>) is no leftover of a test.
      left = readdirSync(root).filter((name) => !/^tsx-\d+$/.test(name));
    } catch {
      // already gone
    }
    if (left.length > 0)
      process.stderr.write(`test run: left in its temp folder (removed now): ${left.sort().join(', ')}\n`);
    try {
      rmSync(root, { recursive: true, force: true });
    } catch (err) {
      // A mount a server left under it (an engine killed mid-test) keeps it busy: said, never hidden.
      process.stderr.write(`test run: could not remove its temp folder ${root}: ${(err as Error).message}\n`);
    }
  };
}
