import { execFile } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The one way gated runs git (docs/WORKTREES.md, "The repository is untrusted"). A repository is input from
 * strangers: its hooks, its `core.fsmonitor`, its filter, diff and merge drivers, its pager, editor, ssh
 * command and credential helpers would all be programs gated runs on the host. Every call here:
 * - turns each of those off on the command line (`-c`, which git hands on to the git processes it starts),
 *   and blanks every filter, diff, merge and remote program the repository's config names (read, never run);
 * - names the git folder and the work tree itself (`--git-dir`, `--work-tree`) once a repository is known,
 *   so a `.git` file an agent wrote in its worktree is never followed;
 * - runs with an environment of its own: PATH and a locale, HOME a path with nothing there, no system or
 *   global config, no terminal prompts; nothing of gated's environment (no secret) and nothing of the
 *   repository (its `.env` is a file like any other, never read);
 * - allows only the https, ssh and git protocols, and a local path only where the operator typed it (a
 *   submodule never fetches `file://` or runs `ext::`).
 * Calls on one repository are serialized (`withRepoLock`), so two topics' worktrees never race on the shared
 * object store and its `worktrees/` metadata.
 */

/** A git command failed: its arguments (never an environment) and the end of its stderr. */
export class GitError extends Error {
  override readonly name = 'GitError';
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

/** Settings that keep git from running anything the repository names. */
const HARDENING: readonly string[] = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.untrackedCache=false',
  'core.sshCommand=ssh -F /dev/null -o BatchMode=yes',
  'core.gitProxy=',
  'core.askPass=',
  'core.pager=cat',
  'core.editor=false',
  'sequence.editor=false',
  'core.alternateRefsCommand=',
  'diff.external=',
  'credential.helper=',
  'gpg.program=false',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
  'submodule.recurse=false',
  'protocol.allow=never',
  'protocol.https.allow=always',
  'protocol.ssh.allow=always',
  'protocol.git.allow=always',
  'protocol.file.allow=user',
  'protocol.ext.allow=never',
  'gc.auto=0',
  'maintenance.auto=false',
  'receive.fsckObjects=true',
  'fetch.fsckObjects=true',
  'transfer.fsckObjects=true',
  'safe.bareRepository=all',
  // A worktree handed to a container's user is not gated's: gated still reads it, with all of the above.
  'safe.directory=*',
];

/** Config keys naming programs under a name the repository chooses (`filter.<name>.smudge`, …). */
const PROGRAM_KEY =
  /^(filter\.[^\n]+\.(clean|smudge|process)|diff\.[^\n]+\.(command|textconv)|merge\.[^\n]+\.driver|remote\.[^\n]+\.(uploadpack|receivepack|vcs)|uploadarchive\.[^\n]*|credential\.[^\n]+\.helper)$/i;

/** git's HOME when the caller names none: a path with nothing there. */
const NO_HOME = '/nonexistent/gated-git-home';

/** The environment every git call gets: nothing of gated's own beyond PATH and the locale. */
export function gitEnv(home: string = NO_HOME): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LANG: 'C',
    LC_ALL: 'C',
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_NO_REPLACE_OBJECTS: '1',
  };
}

/** Where a git call runs: a repository's git folder and, for a worktree, its work tree. */
export interface GitPlace {
  gitDir?: string;
  workTree?: string;
  /** The working directory (default: the work tree, else the git folder, else `/`). */
  cwd?: string;
  /** git's HOME: default a path with nothing there (no ~/.gitconfig, ~/.ssh, credential store). */
  home?: string;
  /** Object folders git may read besides the repository's own (GIT_ALTERNATE_OBJECT_DIRECTORIES). */
  alternates?: string;
}

const MAX_BUFFER = 256 * 1024 * 1024;

/** Runs git with `args` and resolves with its stdout; rejects with a GitError. */
export function git(
  place: GitPlace,
  args: readonly string[],
  extra: readonly string[] = [],
): Promise<string> {
  return gitBytes(place, args, extra).then((b) => b.toString('utf8'));
}

/** As git(), with `input` on stdin and stdout as bytes (a pack). */
export function gitBytes(
  place: GitPlace,
  args: readonly string[],
  extra: readonly string[] = [],
  input?: Buffer | string,
): Promise<Buffer> {
  const head = HARDENING.concat(extra).flatMap((c) => ['-c', c]);
  if (place.gitDir !== undefined) head.push(`--git-dir=${place.gitDir}`);
  if (place.workTree !== undefined) head.push(`--work-tree=${place.workTree}`);
  const cwd = place.cwd ?? place.workTree ?? place.gitDir ?? '/';
  const env = gitEnv(place.home);
  if (place.alternates !== undefined) env.GIT_ALTERNATE_OBJECT_DIRECTORIES = place.alternates;
  return new Promise((done, fail) => {
    const child = execFile(
      'git',
      [...head, ...args],
      { cwd, env, maxBuffer: MAX_BUFFER, timeout: 10 * 60_000, encoding: 'buffer' },
      (err, stdout, stderr) => {
        if (err === null) return done(stdout);
        const tail = String(stderr).trim().split('\n').slice(-5).join('\n');
        fail(new GitError(`git ${args.join(' ')}: ${tail || err.message}`, String(stderr)));
      },
    );
    child.stdin?.on('error', () => {});
    child.stdin?.end(input);
  });
}

/**
 * Blanks, for one call, every program the repository's own config names under a name of its choosing (a
 * filter's clean and smudge, a diff driver, a merge driver, a remote's upload-pack): read with
 * `git config --list`, which runs nothing.
 */
export async function repoOverrides(gitDir: string): Promise<string[]> {
  const out = await git({ gitDir }, ['config', '--list', '--name-only', '--includes']).catch(() => '');
  const keys = new Set(out.split('\n').filter((k) => PROGRAM_KEY.test(k)));
  const extra = [...keys].map((k) => `${k}=`);
  for (const k of keys) {
    const filter = /^filter\.(.+)\.(clean|smudge|process)$/i.exec(k);
    if (filter) extra.push(`filter.${filter[1]}.required=false`);
  }
  return extra;
}

/** Runs git on a known repository with its own programs blanked (repoOverrides). */
export async function repoGit(
  place: GitPlace & { gitDir: string },
  args: readonly string[],
): Promise<string> {
  return git(place, args, await repoOverrides(place.gitDir));
}

/** As repoGit(), with `input` on stdin and stdout as bytes. */
export async function repoGitBytes(
  place: GitPlace & { gitDir: string },
  args: readonly string[],
  input?: Buffer | string,
): Promise<Buffer> {
  return gitBytes(place, args, await repoOverrides(place.gitDir), input);
}

const locks = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` once no other call holds the repository at `gitDir` (in this process): git operations that
 * change a repository's worktrees or refs run one at a time.
 */
export function withRepoLock<T>(gitDir: string, fn: () => Promise<T>): Promise<T> {
  let key: string;
  try {
    key = realpathSync(gitDir);
  } catch {
    key = resolve(gitDir);
  }
  const before = locks.get(key) ?? Promise.resolve();
  const mine = before.then(fn, fn);
  const tail = mine.catch(() => {});
  locks.set(key, tail);
  void tail.then(() => {
    if (locks.get(key) === tail) locks.delete(key);
  });
  return mine;
}
