// The Codex CLI's home (CODEX_HOME) for one run (docs/AGENTS.md, "What each agent reads at start"). The CLI
// trusts what its home holds at start: config.toml, hooks.json, rules/, AGENTS.md, skills/. Kept in the
// group's folder, the model's own shell could plant them for the next run (hooks run outside the sandbox,
// unasked). So the home is a fresh private folder outside the workspace, made per run and removed at the
// end; every setting reaches the CLI as `--config` (config.mjs). Only the threads' rollout files
// (sessions/…/rollout-*.jsonl: plain JSON lines of a conversation, which the CLI reads as history, never as
// settings) persist, in the folder's `.codex-agent/sessions/`: copied in at the start (regular files with one
// name only, no link followed) and out after each turn, so a later run resumes its threads.
import { constants, copyFileSync, lstatSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ownedTempDir, removeOwnedDir, sweepOwnedDirs } from './owned-dir.mjs';

/** The name of a run's home in the temp folder, before mkdtemp's six characters. */
const HOME_PREFIX = 'gated-codex-home-';

/** What the CLI reads from its home as settings, hooks, rules or instructions. */
const TRUSTED = [
  'config.toml',
  'hooks.json',
  'rules',
  'AGENTS.md',
  'AGENTS.override.md',
  'skills',
  'prompts',
];

const ROLLOUT = /^rollout-[A-Za-z0-9._:-]+\.jsonl$/;

/** The rollout files below `dir` (relative paths), links and anything but regular files left out. */
function rollouts(dir, base = dir, depth = 0) {
  const out = [];
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory() && depth < 4) out.push(...rollouts(path, base, depth + 1));
    else if (e.isFile() && ROLLOUT.test(e.name)) {
      const st = lstatSync(path);
      if (st.isFile() && st.nlink === 1) out.push(relative(base, path));
    }
  }
  return out;
}

/** Copies the rollout files of `from` into `to` (each made anew: a link at the target is replaced). */
function copyRollouts(from, to, onlyNewer) {
  for (const rel of rollouts(from)) {
    const src = join(from, rel);
    const dst = join(to, rel);
    if (onlyNewer) {
      const d = statSync(dst, { throwIfNoEntry: false });
      const s = statSync(src);
      if (d && d.size === s.size && d.mtimeMs >= s.mtimeMs) continue;
    }
    mkdirSync(join(dst, '..'), { recursive: true });
    rmSync(dst, { force: true });
    copyFileSync(src, dst, constants.COPYFILE_EXCL);
  }
}

/** The run's home: `dir` (CODEX_HOME), `save()` after each turn, `remove()` at the end. */
export async function runHome(workspace) {
  const store = join(workspace, '.codex-agent', 'sessions');
  // A run killed with -9 leaves its home behind (a few KiB of the CLI's state, no secret: the key is in
  // the CLI's environment only): the next run's start removes it (owned-dir.mjs).
  await sweepOwnedDirs(tmpdir(), HOME_PREFIX);
  const dir = await ownedTempDir(tmpdir(), HOME_PREFIX);
  copyRollouts(store, join(dir, 'sessions'), false);
  return {
    dir,
    /**
     * Removes what the CLI would trust from the home before each turn's CLI starts: nothing of the agent's
     * puts it there, so anything found was planted during the run (the CLI's sandbox keeps the model's
     * commands out of the temp folder on the host, config.mjs; in a container it may not).
     */
    clean() {
      for (const name of TRUSTED) rmSync(join(dir, name), { recursive: true, force: true });
    },
    save() {
      copyRollouts(join(dir, 'sessions'), store, true);
    },
    remove() {
      removeOwnedDir(dir);
    },
  };
}
