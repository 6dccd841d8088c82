import { repositoryOfChat } from '../core/platforms.js';
import type { Signals } from '../core/signals.js';
import { isoNow, type SessionKey } from '../core/types.js';
import type { Logger } from '../core/log.js';
import type { Db } from '../store/db.js';
import { insertOutbound } from '../store/messages.js';
import { cloneUrlOf, WorktreeStore, type RepoRow, type WorktreeRow } from '../store/worktrees.js';
import { withRepoLock } from '../worktrees/git.js';
import { removeWorktree, type Removal } from '../worktrees/remove.js';
import {
  bindRepository,
  ensureWorktree,
  repoHomeOf,
  reposDirOf,
  type RepoPlace,
} from '../worktrees/worktrees.js';
import type { RunSpec, WorkTree } from './runtime/types.js';

/**
 * A run of a group bound to a repository works in its topic's worktree (docs/WORKTREES.md): made at the
 * topic's first run, found again after, recorded with the time of the run. A group without a repository
 * keeps its folder. A git failure fails the start (the run's rows are retried like any failed start). A
 * worktree asked to go (/new #topic, its issue closed) is removed first, and the topic starts afresh.
 */
export interface WorktreeContext {
  db: Db;
  groupsDir: string;
  log: Logger;
  now?: () => number;
  signals?: Signals | undefined;
  /** GITHUB_WORKTREES: bind a group serving a GitHub chat to its repository at its first run. */
  githubWorktrees?: boolean | undefined;
}

export async function withWorktree(
  ctx: WorktreeContext,
  spec: RunSpec,
  key: SessionKey,
  chatJid: string,
): Promise<RunSpec> {
  const { db, groupsDir, log, signals } = ctx;
  const now = ctx.now ?? Date.now;
  const store = new WorktreeStore(db);
  const repo =
    store.repo(key.group) ??
    (ctx.githubWorktrees ? await bindToRoomRepository(ctx, key.group, chatJid) : undefined);
  if (repo === undefined) return spec;
  const reposDir = reposDirOf(groupsDir);
  let known = store.worktree(key.group, key.topic);
  if (known?.remove_reason != null) {
    await removeTopicWorktree(db, repo, known, log, signals);
    known = undefined;
  }
  const tree = await ensureWorktree(reposDir, placeOf(repo), key.group, key.topic, known?.branch);
  if (tree.created) log.info({ group: key.group, topic: key.topic, branch: tree.branch }, 'worktree made');
  try {
    store.ran(key.group, key.topic, tree.path, tree.branch, isoNow(now()));
  } catch (err) {
    // Only the list's last-run time is lost (another process holds the write lock); the run goes on.
    log.warn({ err, group: key.group }, 'worktree run time not recorded');
  }
  const work: WorkTree = {
    dir: tree.path,
    root: repoHomeOf(reposDir, key.group),
    gitDir: repo.git_dir,
    adminDir: tree.adminDir,
    branch: tree.branch,
  };
  return { ...spec, work };
}

/**
 * Binds `group` to the repository the chat its run serves names (`github:owner/name#N`: its platform's
 * `repositoryRooms` in core/platforms.ts), cloned from the URL that repository's deliveries named; undefined
 * for any other chat or a repository never heard of.
 */
async function bindToRoomRepository(
  ctx: WorktreeContext,
  group: string,
  chatJid: string,
): Promise<RepoRow | undefined> {
  const repo = repositoryOfChat(chatJid);
  const url = repo ? cloneUrlOf(ctx.db, repo) : undefined;
  if (url === undefined) return undefined;
  const reposDir = reposDirOf(ctx.groupsDir);
  // Two topics' first runs at once clone once: the second finds the clone.
  const place = await withRepoLock(repoHomeOf(reposDir, group), () => bindRepository(reposDir, group, url));
  const store = new WorktreeStore(ctx.db);
  store.bind({ group_folder: group, source: url, git_dir: place.gitDir, branch: place.branch, cloned: 1 });
  ctx.log.info({ group, url, branch: place.branch }, "group bound to its chat's repository");
  return store.repo(group);
}

/** A group_repos row as the git side needs it. */
export function placeOf(repo: RepoRow): RepoPlace {
  return { gitDir: repo.git_dir, branch: repo.branch, cloned: repo.cloned === 1 };
}

/** What the chat is told when a topic's worktree went. */
export function removalNote(row: WorktreeRow, why: string, r: Removal): string {
  const topic = row.topic === '' ? 'the default topic' : `#${row.topic}`;
  const head = `The worktree of ${topic} was removed (${why}).`;
  if (!r.kept)
    return `${head} Its branch ${r.branch} held nothing that is not on the base branch, and is gone.`;
  const saved = r.saved ? ', its uncommitted changes committed on it first' : '';
  const n = r.unpushed === 1 ? '1 commit' : `${r.unpushed} commits`;
  return `${head} Its branch ${r.branch} is kept with ${n} not pushed anywhere${saved}.`;
}

/**
 * Removes one topic's worktree (removeWorktree: work kept on its branch), forgets its row, and tells the
 * chat that asked (else the topic's latest chat) what became of the branch. Returns the note's row id.
 */
export function removeTopicWorktree(
  db: Db,
  repo: RepoRow,
  row: WorktreeRow,
  log: Logger,
  signals?: Signals,
  why: string = row.remove_reason ?? 'removed by the operator',
): Promise<{ removal: Removal; noteId: number | null }> {
  // One removal per topic at a time in this process: the sweep and a run starting share it.
  const id = `${row.group_folder}#${row.topic}`;
  const current = removing.get(id);
  if (current) return current;
  const p = removeNow(db, repo, row, log, signals, why).finally(() => removing.delete(id));
  removing.set(id, p);
  return p;
}

const removing = new Map<string, Promise<{ removal: Removal; noteId: number | null }>>();

async function removeNow(
  db: Db,
  repo: RepoRow,
  row: WorktreeRow,
  log: Logger,
  signals: Signals | undefined,
  why: string,
): Promise<{ removal: Removal; noteId: number | null }> {
  const removal = await removeWorktree(placeOf(repo), row.path, row.branch, row.topic);
  const store = new WorktreeStore(db);
  const chat = row.remove_chat ?? store.lastChat(row.group_folder, row.topic);
  const content = removalNote(row, why, removal);
  const noteId = db.transaction(() => {
    store.forget(row.group_folder, row.topic);
    if (chat === null) return null;
    return insertOutbound(db, { chat_jid: chat, content, kind: 'status', topic: row.topic });
  })();
  log.info({ group: row.group_folder, topic: row.topic, ...removal, why }, 'worktree removed');
  if (noteId !== null) signals?.outbound.fire(noteId);
  return { removal, noteId };
}

/**
 * Removes the worktrees asked to go whose topic has no run now (`busy`), one at a time; a run that starts
 * meanwhile removes its own first (withWorktree). A failure is logged and tried again at the next sweep.
 */
export function worktreeSweeper(
  db: Db,
  busy: (key: SessionKey) => boolean,
  log: Logger,
  signals?: Signals,
): () => Promise<void> {
  let running: Promise<void> | null = null;
  let again = false;
  // Made once: a sweep follows every run's end.
  const store = new WorktreeStore(db);
  const pass = async (): Promise<void> => {
    for (const row of store.removals()) {
      if (busy({ group: row.group_folder, topic: row.topic })) continue;
      const repo = store.repo(row.group_folder);
      try {
        if (repo === undefined) store.forget(row.group_folder, row.topic);
        else await removeTopicWorktree(db, repo, row, log, signals);
      } catch (err) {
        log.warn(
          { err, group: row.group_folder, topic: row.topic },
          'worktree not removed; tried again later',
        );
      }
    }
  };
  const sweep = (): Promise<void> => {
    if (running !== null) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await pass();
      } while (again);
    })()
      .catch((err: unknown) => log.warn({ err }, 'worktree sweep failed; tried again later'))
      .finally(() => (running = null));
    return running;
  };
  return sweep;
}
