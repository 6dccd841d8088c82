import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { git, gitEnv, repoGit } from '../../worktrees/git.js';
import { bindRepository, ensureWorktree, reposDirOf } from '../../worktrees/worktrees.js';
import { tempDir } from '../helpers/db.js';
import { makeRepo, plainGit } from './helpers.js';

/** A program that leaves a marker named `name` in `markers` (and passes its stdin on, as a filter must). */
function planted(dir: string, markers: string, name: string): string {
  const file = join(dir, name);
  writeFileSync(file, `#!/bin/sh\ntouch '${join(markers, name)}'\ncat\n`);
  chmodSync(file, 0o755);
  return file;
}

/**
 * A repository that runs programs wherever git lets a repository name one: a post-checkout hook (in
 * .git/hooks and in a core.hooksPath of its own), core.fsmonitor, a required smudge/clean filter on every
 * file, a diff driver's textconv.
 */
function hostileRepo(root: string, markers: string): string {
  const repo = makeRepo(join(root, 'hostile'));
  const bin = join(root, 'bin');
  mkdirSync(bin);
  writeFileSync(join(repo, '.gitattributes'), '* filter=evil diff=evil\n');
  plainGit(repo, 'add', '.gitattributes');
  plainGit(repo, 'commit', '-q', '-m', 'attributes');
  cpSync(planted(bin, markers, 'post-checkout'), join(repo, '.git', 'hooks', 'post-checkout'));
  mkdirSync(join(root, 'hooks'));
  cpSync(planted(bin, markers, 'post-checkout'), join(root, 'hooks', 'post-checkout'));
  plainGit(repo, 'config', 'core.hooksPath', join(root, 'hooks'));
  plainGit(repo, 'config', 'core.fsmonitor', planted(bin, markers, 'fsmonitor'));
  plainGit(repo, 'config', 'filter.evil.smudge', planted(bin, markers, 'smudge'));
  plainGit(repo, 'config', 'filter.evil.clean', planted(bin, markers, 'clean'));
  plainGit(repo, 'config', 'filter.evil.required', 'true');
  plainGit(repo, 'config', 'diff.evil.textconv', planted(bin, markers, 'textconv'));
  return repo;
}

describe('the repository is untrusted: gated runs none of its programs', { timeout: 60_000 }, () => {
  it('a planted post-checkout hook, fsmonitor, filters and diff driver run under plain git (the plant works)', () => {
    const root = tempDir();
    const markers = join(root, 'markers');
    mkdirSync(markers);
    const repo = hostileRepo(root, markers);
    plainGit(repo, 'worktree', 'add', '-q', '-b', 'plain', join(root, 'plain'));
    writeFileSync(join(root, 'plain', 'shared.txt'), 'changed\n');
    plainGit(join(root, 'plain'), 'status', '--porcelain');
    plainGit(join(root, 'plain'), 'diff');
    expect(readdirSync(markers).sort()).toEqual([
      'clean',
      'fsmonitor',
      'post-checkout',
      'smudge',
      'textconv',
    ]);
  });

  it('binding, a worktree, status and diff through gated run none of them on the host', async () => {
    const root = tempDir();
    const markers = join(root, 'markers');
    mkdirSync(markers);
    const repo = hostileRepo(root, markers);
    const reposDir = reposDirOf(join(root, 'groups'));
    const place = await bindRepository(reposDir, 'code', repo);
    const tree = await ensureWorktree(reposDir, place, 'code', 'support');
    expect(tree).toMatchObject({ branch: 'topic-support', created: true });
    expect(readFileSync(join(tree.path, 'shared.txt'), 'utf8')).toBe('base\n');
    writeFileSync(join(tree.path, 'shared.txt'), 'changed\n');
    const place2 = { gitDir: tree.adminDir, workTree: tree.path };
    expect(await repoGit(place2, ['status', '--porcelain'])).toBe(' M shared.txt\n');
    expect(await repoGit(place2, ['diff', '--stat'])).toMatch(/shared.txt/);
    // Found again, not made twice.
    expect(await ensureWorktree(reposDir, place, 'code', 'support')).toMatchObject({ created: false });
    expect(readdirSync(markers)).toEqual([]);
  });

  it('a .git file the agent wrote in its worktree is never followed: gated names the git folder itself', async () => {
    const root = tempDir();
    const markers = join(root, 'markers');
    mkdirSync(markers);
    const honest = makeRepo(join(root, 'honest'));
    const evil = hostileRepo(root, markers);
    const reposDir = reposDirOf(join(root, 'groups'));
    const place = await bindRepository(reposDir, 'code', honest);
    const tree = await ensureWorktree(reposDir, place, 'code', 'x');
    // The agent points its worktree at a repository of its choosing.
    writeFileSync(join(tree.path, '.git'), `gitdir: ${join(evil, '.git')}\n`);
    const again = await ensureWorktree(reposDir, place, 'code', 'x');
    expect(again.adminDir).toBe(tree.adminDir);
    expect(
      await repoGit({ gitDir: again.adminDir, workTree: again.path }, ['rev-parse', '--abbrev-ref', 'HEAD']),
    ).toBe('topic-x\n');
    expect(readdirSync(markers)).toEqual([]);
  });

  it('clones a URL bare, but never over ext:: and never with gated secrets in git environment', async () => {
    const root = tempDir();
    const markers = join(root, 'markers');
    mkdirSync(markers);
    const source = makeRepo(join(root, 'upstream'));
    const reposDir = reposDirOf(join(root, 'groups'));
    const place = await bindRepository(reposDir, 'code', `file://${source}`);
    expect(place).toMatchObject({ branch: 'main', cloned: true });
    expect(existsSync(join(place.gitDir, 'HEAD'))).toBe(true);
    expect(plainGit(place.gitDir, 'rev-parse', '--is-bare-repository')).toBe('true');
    const tree = await ensureWorktree(reposDir, place, 'code', 'issue-3');
    expect(readFileSync(join(tree.path, 'shared.txt'), 'utf8')).toBe('base\n');

    const ext = `ext::sh -c touch% ${join(markers, 'ext')}`;
    await expect(bindRepository(reposDir, 'other', ext)).rejects.toThrow(/transport 'ext' not allowed/);
    expect(readdirSync(markers)).toEqual([]);

    process.env.GATED_TEST_SECRET = 'hunter2';
    try {
      expect(Object.keys(gitEnv())).not.toContain('GATED_TEST_SECRET');
      const env = await git({}, ['var', 'GIT_COMMITTER_IDENT']).catch((e: Error) => e.message);
      expect(env).not.toContain('hunter2');
    } finally {
      delete process.env.GATED_TEST_SECRET;
    }
  });
});
