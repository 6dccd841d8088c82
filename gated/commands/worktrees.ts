import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { getGroup } from '../../store/groups.js';
import { WorktreeStore } from '../../store/worktrees.js';
import { GitError } from '../../worktrees/git.js';
import { bindRepository, reposDirOf } from '../../worktrees/worktrees.js';
import { sessionKeyId, type SessionKey } from '../../core/types.js';
import { removalNote, removeTopicWorktree } from '../../queue/worktree.js';
import { aheadBehind } from '../../worktrees/remove.js';
import { action, type CliContext } from '../context.js';
import { sinceArg } from './access.js';

/**
 * `gated groups repo FOLDER URL|PATH [--branch B]`: binds a group to a git repository (docs/WORKTREES.md),
 * cloning a URL bare beside the groups folder or adopting a local repository where it lies. Each topic of
 * the group then runs in a worktree of its own on a branch of its own.
 */
export function repoCommand(groups: Command): void {
  groups
    .command('repo')
    .description(
      'bind a group to a git repository: clone URL (beside the groups folder) or adopt a local repository PATH; ' +
        'each topic then runs in its own worktree on its own branch',
    )
    .argument('<folder>', 'the group')
    .argument('<source>', 'a URL to clone, or the path of an existing local repository')
    .option('--branch <branch>', 'the base branch of the topics (default: the repository HEAD branch)')
    .action(
      action(async (ctx, folder: string, source: string, opts: { branch?: string }) => {
        const db = ctx.db();
        if (getGroup(db, folder) === undefined) throw new UsageError(`no group '${folder}'`);
        let place;
        try {
          place = await bindRepository(reposDirOf(ctx.config.groupsDir), folder, source, opts.branch);
        } catch (err) {
          if (err instanceof GitError) throw new UsageError(err.message);
          throw err;
        }
        new WorktreeStore(db).bind({
          group_folder: folder,
          source,
          git_dir: place.gitDir,
          branch: place.branch,
          cloned: place.cloned ? 1 : 0,
        });
        ctx.out(
          `group ${folder} bound to ${source} (${place.cloned ? 'cloned' : 'adopted'}, base branch ${place.branch})`,
        );
      }),
    );
}

/** `gated worktrees list | rm | prune`: the topics' worktrees of bound groups (docs/WORKTREES.md). */
export function worktreesCommand(program: Command): void {
  const wt = program
    .command('worktrees')
    .description("the topics' git worktrees of groups bound to a repository");
  listCommand(wt);
  removeCommands(wt);
}

/** `gated worktrees list`. */
function listCommand(wt: Command): void {
  wt.command('list')
    .description(
      'every worktree: group, topic, branch, last run, commits ahead of and behind the base branch',
    )
    .option('--group <folder>', 'only this group')
    .action(
      action(async (ctx, opts: { group?: string }) => {
        const store = new WorktreeStore(ctx.db({ readOnly: true }));
        ctx.out(['group', 'topic', 'branch', 'last_run', 'ahead', 'behind', 'path', 'removal'].join('\t'));
        for (const w of store.worktrees(opts.group)) {
          const repo = store.repo(w.group_folder);
          const ab = repo ? await aheadBehind(repo.git_dir, repo.branch, w.branch) : null;
          ctx.out(
            [
              w.group_folder,
              w.topic === '' ? '(default)' : `#${w.topic}`,
              w.branch,
              w.last_run_at ?? '',
              ab ? String(ab.ahead) : '?',
              ab ? String(ab.behind) : '?',
              w.path,
              w.remove_reason ? `asked: ${w.remove_reason}` : '',
            ].join('\t'),
          );
        }
      }),
    );
}

/** `gated worktrees rm | prune`. */
function removeCommands(wt: Command): void {
  wt.command('rm')
    .description(
      "remove a topic's worktree: uncommitted work is committed on its branch, a branch with unpushed work is " +
        'kept, and the chat is told; while the topic has a run, gated removes it when the run ends',
    )
    .argument('<folder>', 'the group')
    .argument('[topic]', 'the topic (#name or name; default: the default topic)')
    .action(
      action(async (ctx, folder: string, topic: string | undefined) => {
        const t = (topic ?? '').replace(/^#/, '');
        const n = await removeOrAsk(ctx, [{ group: folder, topic: t }], 'removed by the operator');
        if (n === 0) throw new UsageError(`no worktree of ${folder}${t ? ' #' + t : ''}`);
      }),
    );
  wt.command('prune')
    .description('remove the worktrees whose topic has not run for a while (default 14d), as rm does')
    .option('--idle <span>', 'how long without a run: 30m, 12h, 7d, or a date', '14d')
    .action(
      action(async (ctx, opts: { idle: string }) => {
        const before = sinceArg(opts.idle);
        const store = new WorktreeStore(ctx.db({ readOnly: true }));
        const idle = store
          .worktrees()
          .filter((w) => (w.last_run_at ?? w.created_at) < before)
          .map((w) => ({ group: w.group_folder, topic: w.topic }));
        const n = await removeOrAsk(ctx, idle, `no run since ${before}`);
        ctx.out(`${n} worktree(s) pruned`);
      }),
    );
}

/**
 * Asks for each key's worktree to go; one whose topic has no run open is removed here and now (its note
 * printed), one with a run is left to gated, which removes it when the run ends. Returns how many existed.
 */
async function removeOrAsk(ctx: CliContext, keys: SessionKey[], why: string): Promise<number> {
  const db = ctx.db();
  const store = new WorktreeStore(db);
  // pino, loaded only by the command that needs a logger (every CLI call would pay for it otherwise).
  const log = (await import('../../core/log.js')).silentLogger();
  let n = 0;
  for (const key of keys) {
    if (!store.requestRemoval(key.group, key.topic, why, null)) continue;
    n++;
    const open = db
      .prepare('SELECT 1 FROM session_log WHERE group_folder = ? AND topic = ? AND ended_at IS NULL')
      .get(key.group, key.topic);
    const row = store.worktree(key.group, key.topic)!;
    const repo = store.repo(key.group);
    if (open !== undefined || repo === undefined) {
      ctx.out(`${sessionKeyId(key)}: a run is open; gated removes the worktree when it ends`);
      continue;
    }
    const { removal } = await removeTopicWorktree(db, repo, row, log, undefined, why);
    ctx.out(`${sessionKeyId(key)}: ${removalNote(row, why, removal)}`);
  }
  return n;
}
