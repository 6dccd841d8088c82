import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { addGroup, listGroups, removeGroup } from '../../store/groups.js';
import { action } from '../context.js';

/** `gated groups list | add | rm`. */
export function groupsCommand(program: Command): void {
  const groups = program.command('groups').description('registered agent workspaces');

  groups
    .command('list')
    .description('registered groups')
    .action(
      action((ctx) => {
        ctx.out(['folder', 'name', 'image', 'network', 'added_at'].join('\t'));
        for (const g of listGroups(ctx.db())) {
          ctx.out([g.folder, g.name ?? '', g.image ?? '', g.network ? 'yes' : 'no', g.added_at].join('\t'));
        }
      }),
    );

  groups
    .command('add')
    .description('register a group and create its folder under GATED_GROUPS_DIR')
    .argument('<folder>', 'lowercase path such as krons/content')
    .option('--name <name>', 'a display name')
    .action(
      action((ctx, folder: string, opts: { name?: string }) => {
        addGroup(ctx.db({ create: true }), ctx.config.groupsDir, folder, opts.name);
        ctx.out(`group ${folder} registered`);
      }),
    );

  groups
    .command('rm')
    .description('unregister a group (its files stay)')
    .argument('<folder>')
    .action(
      action((ctx, folder: string) => {
        if (!removeGroup(ctx.db(), folder)) throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder} removed`);
      }),
    );
}
