import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { getGroup } from '../../store/groups.js';
import { WorktreeStore } from '../../store/worktrees.js';
import { GitError } from '../../worktrees/git.js';
import { bindRepository, reposDirOf } from '../../worktrees/worktrees.js';
import { action } from '../context.js';

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
