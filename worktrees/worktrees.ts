import { createHash } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
} from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { diskNameOf } from '../core/group-dir.js';
import { git, GitError, repoGit, withRepoLock } from './git.js';

/**
 * Codebases and a worktree per topic (docs/WORKTREES.md). A group bound to a git repository gets, for each
 * of its topics, a worktree of its own on a branch of its own, made at the topic's first run and reused
 * after. On disk (beside the groups folder, never inside a group's folder):
 *
 *     <repos>/<group's disk name>/repo.git      a bare clone gated made (absent for an adopted repository)
 *     <repos>/<group's disk name>/<branch>      one worktree per topic, named as its branch
 *
 * The folder of one group's worktrees is the operator's: no agent sees it, only its own worktree inside it.
 */

/** Where the repositories and worktrees of bound groups live: `repos` beside the groups folder. */
export function reposDirOf(groupsDir: string): string {
  return join(dirname(resolve(groupsDir)), 'repos');
}

/** The folder of one group's clone and worktrees. */
export function repoHomeOf(reposDir: string, folder: string): string {
  return join(reposDir, diskNameOf(folder));
}

/** A group's repository as bound: where its git folder is and the branch new topics start from. */
export interface RepoPlace {
  gitDir: string;
  branch: string;
  /** True when gated cloned it (its own bare clone), false for an operator's repository adopted. */
  cloned: boolean;
}

/** The local path the operator named, when `source` is one (an existing folder); else null (a URL). */
function localPath(source: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source) || /^[^/]+@[^/:]+:/.test(source)) return null;
  const p = resolve(source);
  return existsSync(p) && statSync(p).isDirectory() ? p : isAbsolute(source) ? p : null;
}

/** What the agent's HOME and a run's own files are called in a worktree: kept out of `git status`. */
const EXCLUDED = ['/.home/'];

/**
 * Binds a repository: clones `source` (a URL) bare into the group's folder of repositories, or adopts an
 * existing local repository where it lies. The base branch is `branch`, else the repository's HEAD branch;
 * it must exist. The repository's info/exclude gets the agent's HOME folder, so it is never committed.
 */
export async function bindRepository(
  reposDir: string,
  folder: string,
  source: string,
  branch?: string,
): Promise<RepoPlace> {
  const local = localPath(source);
  let gitDir: string;
  let cloned = false;
  if (local !== null) {
    if (!existsSync(local)) throw new GitError(`no repository at ${local}`, '');
    const out = await git({ cwd: local }, ['rev-parse', '--path-format=absolute', '--git-common-dir']);
    gitDir = realpathSync(out.trim());
  } else {
    const home = repoHomeOf(reposDir, folder);
    mkdirSync(home, { recursive: true });
    gitDir = join(home, 'repo.git');
    if (!existsSync(gitDir)) {
      const args = ['clone', '--bare', '--no-recurse-submodules'];
      if (branch !== undefined) args.push('--branch', branch);
      await git({ cwd: home }, [...args, '--', source, gitDir]);
    }
    cloned = true;
  }
  const base =
    branch ?? (await repoGit({ gitDir }, ['symbolic-ref', '--short', 'HEAD']).catch(() => 'main')).trim();
  await repoGit({ gitDir }, ['rev-parse', '--verify', '--quiet', `refs/heads/${base}^{commit}`]).catch(() => {
    throw new GitError(`the repository has no branch '${base}'`, '');
  });
  excludeAgentFiles(gitDir);
  return { gitDir, branch: base, cloned };
}

function excludeAgentFiles(gitDir: string): void {
  const file = join(gitDir, 'info', 'exclude');
  mkdirSync(dirname(file), { recursive: true });
  const have = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const missing = EXCLUDED.filter((line) => !have.split('\n').includes(line));
  if (missing.length === 0) return;
  const lead = have === '' || have.endsWith('\n') ? '' : '\n';
  appendFileSync(file, `${lead}# gated: the agent's own files (docs/WORKTREES.md)\n${missing.join('\n')}\n`);
}

/**
 * The branch (and worktree folder) of a topic: `issue-N`, `pr-N` and `thread-…` topics keep their names,
 * `#name` becomes `topic-name`, the default topic `main-topic`. A name that had to change (case, characters
 * git or a folder would not take) gets a short hash of the topic, so two topics never share a branch.
 */
export function topicBranch(topic: string): string {
  if (topic === '') return 'main-topic';
  if (/^(issue|pr)-[1-9]\d*$/.test(topic) || /^thread-[a-z0-9-]+$/.test(topic)) return topic;
  const slug = topic
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48);
  const name = `topic-${slug || 'x'}`;
  if (slug === topic) return name;
  return `${name}-${createHash('sha256').update(topic).digest('hex').slice(0, 6)}`;
}

/** One topic's worktree: its folder and its branch. */
export interface TopicWorktree {
  path: string;
  branch: string;
  /** The worktree's own git folder (`<git dir>/worktrees/<name>`). */
  adminDir: string;
  /** True when this call made it. */
  created: boolean;
}

/** The worktrees git knows of a repository: folder → branch (`refs/heads/…` stripped; '' when detached). */
export async function listGitWorktrees(gitDir: string): Promise<Map<string, string>> {
  const out = await repoGit({ gitDir }, ['worktree', 'list', '--porcelain']);
  const found = new Map<string, string>();
  let path: string | null = null;
  for (const line of out.split('\n')) {
    if (line.startsWith('worktree ')) {
      path = line.slice('worktree '.length);
      found.set(path, '');
    } else if (line.startsWith('branch ') && path !== null)
      found.set(path, line.slice('branch '.length).replace(/^refs\/heads\//, ''));
  }
  return found;
}

/** The git folder of a worktree gated made, read from its `gitdir` back-link (never from the worktree). */
export function adminDirOf(gitDir: string, path: string): string {
  const base = join(gitDir, 'worktrees');
  for (const name of existsSync(base) ? readdirSync(base) : []) {
    const link = join(base, name, 'gitdir');
    if (existsSync(link) && readFileSync(link, 'utf8').trim() === join(path, '.git')) return join(base, name);
  }
  throw new GitError(`no worktree metadata for ${path}`, '');
}

/**
 * The worktree of (`folder`, `topic`): made on its branch at the first call (the branch from `base` when it
 * does not exist yet, a `pr-N` branch fetched from the pull request's head, else the existing branch checked
 * out), found again after. Serialized per repository.
 */
export function ensureWorktree(
  reposDir: string,
  repo: RepoPlace,
  folder: string,
  topic: string,
  branch: string = topicBranch(topic),
): Promise<TopicWorktree> {
  const pr = /^pr-([1-9]\d*)$/.exec(branch);
  const home = repoHomeOf(reposDir, folder);
  const path = join(home, branch);
  const { gitDir } = repo;
  return withRepoLock(gitDir, async () => {
    mkdirSync(home, { recursive: true });
    const known = await listGitWorktrees(gitDir);
    if (known.has(path) && existsSync(join(path, '.git')))
      return { path, branch, adminDir: adminDirOf(gitDir, path), created: false };
    // A worktree whose folder was deleted by hand is forgotten before its branch is checked out again.
    await repoGit({ gitDir }, ['worktree', 'prune']);
    if (existsSync(path)) throw new GitError(`${path} exists and is not a worktree of the repository`, '');
    const exists = await repoGit({ gitDir }, [
      'rev-parse',
      '--verify',
      '--quiet',
      `refs/heads/${branch}`,
    ]).then(
      () => true,
      () => false,
    );
    // A clone of gated's own brings its base branch up to date first (an unreachable origin leaves it).
    if (!exists && repo.cloned)
      await repoGit({ gitDir }, [
        'fetch',
        '--no-tags',
        'origin',
        `+refs/heads/${repo.branch}:refs/heads/${repo.branch}`,
      ]).catch(() => '');
    // A pull request's topic starts on the pull request's head, as its origin serves it (GitHub's
    // refs/pull/N/head), never on the base branch; kept as a remote ref too, so its commits count as pushed.
    const pullRef = pr ? `refs/remotes/origin/pull/${pr[1]}` : null;
    if (!exists && pullRef !== null)
      await repoGit({ gitDir }, ['fetch', '--no-tags', 'origin', `+refs/pull/${pr![1]}/head:${pullRef}`]);
    const args = exists ? [path, branch] : ['-b', branch, path, pullRef ?? repo.branch];
    await repoGit({ gitDir, cwd: home }, ['worktree', 'add', ...args]);
    return { path, branch, adminDir: adminDirOf(gitDir, path), created: true };
  });
}
