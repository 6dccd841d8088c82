/**
 * A group's configuration read once and kept while its files are unchanged (core/config-files.ts
 * `ConfigSnapshot`, core/group-config.ts): every kind of change an operator (or a link planted in the
 * folder) can make is seen by the next read, and files changed too recently to be told apart are not kept.
 */
import { chmodSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readTracked, type ConfigSnapshot } from '../../core/config-files.js';
import { readGroupConfig } from '../../core/group-config.js';
import { tempDir } from '../helpers/db.js';
import { INSTRUCTION, writeGroupConfig } from '../helpers/group-config.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A snapshot of what reading `folder`'s configuration looks at, taken as if the read had happened long
 * after the files were written (settled), so that what `unchanged()` says is the stamps' doing alone.
 */
function settledSnapshot(root: string, folder: string): ConfigSnapshot {
  const { snapshot } = readTracked(root, () => readGroupConfig(root, folder), Date.now() + 10_000);
  expect(snapshot.settled).toBe(true);
  expect(snapshot.unchanged()).toBe(true);
  return snapshot;
}

describe('configuration snapshots', () => {
  it('see an edit in place, even of the same size', async () => {
    const root = tempDir('gated-cfgsnap-');
    writeGroupConfig(root, 'ops');
    await sleep(30);
    const snap = settledSnapshot(root, 'ops');
    writeFileSync(join(root, 'ops', 'CLAUDE.md'), `${INSTRUCTION.replace('7', '8')}\n`);
    expect(snap.unchanged()).toBe(false);
  });

  it('see a file added where none was, a file removed, and a folder replaced by a link', async () => {
    const root = tempDir('gated-cfgsnap-');
    writeGroupConfig(root, 'ops');
    mkdirSync(join(root, 'elsewhere'));
    await sleep(30);
    let snap = settledSnapshot(root, 'ops');
    writeFileSync(join(root, 'ops', 'AGENTS.md'), 'more\n');
    expect(snap.unchanged()).toBe(false);
    await sleep(30);
    snap = settledSnapshot(root, 'ops');
    rmSync(join(root, 'ops', 'AGENTS.md'));
    expect(snap.unchanged()).toBe(false);
    await sleep(30);
    snap = settledSnapshot(root, 'ops');
    renameSync(join(root, 'ops', 'skills'), join(root, 'elsewhere', 'skills'));
    symlinkSync(join(root, 'elsewhere', 'skills'), join(root, 'ops', 'skills'));
    expect(snap.unchanged()).toBe(false);
  });

  it('see a mode change, and a root that appears where there was none', async () => {
    const root = tempDir('gated-cfgsnap-');
    writeGroupConfig(root, 'ops');
    await sleep(30);
    const snap = settledSnapshot(root, 'ops');
    chmodSync(join(root, 'ops', 'mcp.json'), 0o600);
    expect(snap.unchanged()).toBe(false);

    const missing = join(tempDir('gated-cfgsnap-'), 'config');
    const { snapshot } = readTracked(missing, () => readGroupConfig(missing, 'b/g1'));
    // Nothing was there: nothing can be too recent.
    expect(snapshot.settled).toBe(true);
    expect(snapshot.unchanged()).toBe(true);
    writeGroupConfig(missing, 'b');
    expect(snapshot.unchanged()).toBe(false);
    expect(readGroupConfig(missing, 'b/g1').instructions).toBe(INSTRUCTION);
  });
});

describe('the configuration cache', () => {
  it('serves a settled read until a file changes, and never serves files changed too recently', async () => {
    const root = tempDir('gated-cfgcache-');
    writeGroupConfig(root, 'ops');
    // Just written: read again every time (a next edit in the same clock tick could not be seen).
    const fresh = readGroupConfig(root, 'ops');
    expect(readGroupConfig(root, 'ops')).not.toBe(fresh);
    expect(readGroupConfig(root, 'ops')).toEqual(fresh);
    // Once the files are older than any filesystem's clock step, one read is kept and served.
    await sleep(2100);
    const kept = readGroupConfig(root, 'ops');
    expect(readGroupConfig(root, 'ops')).toBe(kept);
    writeFileSync(join(root, 'ops', 'CLAUDE.md'), `${INSTRUCTION.replace('7', '9')}\n`);
    const edited = readGroupConfig(root, 'ops');
    expect(edited).not.toBe(kept);
    expect(edited.instructions).toBe(INSTRUCTION.replace('7', '9'));
    // A link put in place of a file is refused on the next read, not followed from the cache.
    rmSync(join(root, 'ops', 'CLAUDE.md'));
    writeFileSync(join(root, 'outside.md'), 'planted\n');
    symlinkSync(join(root, 'outside.md'), join(root, 'ops', 'CLAUDE.md'));
    const linked = readGroupConfig(root, 'ops');
    expect(linked.instructions).toBe('');
    expect(linked.problems).toContainEqual({
      file: 'ops/CLAUDE.md',
      reason: 'ops/CLAUDE.md is a symbolic link',
    });
  });

  it('keeps nothing per group while there is no configuration folder, and sees it once it is made', () => {
    const root = join(tempDir('gated-cfgcache-'), 'config');
    const none = readGroupConfig(root, 'b/g1');
    // A fresh answer each time (10,000 groups without a folder keep no entry each), equal in content.
    expect(readGroupConfig(root, 'b/g1')).not.toBe(none);
    expect(readGroupConfig(root, 'b/g1')).toStrictEqual(none);
    expect(none).toMatchObject({ instructions: '', skills: [], commands: [], sources: [], problems: [] });
    writeGroupConfig(root, 'b/g1');
    expect(readGroupConfig(root, 'b/g1').instructions).toBe(INSTRUCTION);
  });
});
