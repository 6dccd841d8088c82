import type { Command } from 'commander';
import { danglingAgent } from '../../store/dangling.js';
import { UsageError } from '../../core/errors.js';
import { isValidFolder } from '../../core/types.js';
import { AUTONOMY_LEVELS, autonomyOf, DEFAULT_AUTONOMY } from '../../router/autonomy.js';
import { AgentStore } from '../../store/agents.js';
import {
  addGroup,
  listGroups,
  networkOf,
  removeGroup,
  setBusyMode,
  setAutonomy,
  setNetwork,
  setThreadMode,
  type Group,
} from '../../store/groups.js';
import { audited } from './access.js';
import { action } from '../context.js';
import { repoCommand } from './worktrees.js';
import { WorktreeStore } from '../../store/worktrees.js';

/** `gated groups list | add | rm | config | agent | threads | busy | autonomy | network | repo`. */
export function groupsCommand(program: Command): void {
  const groups = program.command('groups').description('registered agent workspaces');
  registryCommands(groups);
  settingCommands(groups);
  runCommands(groups);
  autonomyCommand(groups);
  repoCommand(groups);
}

/** `gated groups list | add | rm`: which groups are registered. */
function registryCommands(groups: Command): void {
  groups
    .command('list')
    .description('registered groups')
    .action(
      action((ctx) => {
        ctx.out(['folder', 'name', 'image', 'network', 'autonomy', 'repo', 'added_at'].join('\t'));
        const db = ctx.db({ readOnly: true });
        const repos = new Map(new WorktreeStore(db).repos().map((r) => [r.group_folder, r]));
        for (const g of listGroups(db)) {
          const autonomy =
            autonomyOf(g.autonomy) ?? `bad: ${String(g.autonomy)} (read as ${DEFAULT_AUTONOMY})`;
          const r = repos.get(g.folder);
          const repo = r ? `${r.source} (${r.branch})` : '';
          ctx.out(
            [g.folder, g.name ?? '', g.image ?? '', networkShown(g), autonomy, repo, g.added_at].join('\t'),
          );
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
        audited(ctx, (db) => addGroup(db, ctx.config.groupsDir, folder, opts.name), { create: true });
        ctx.out(`group ${folder} registered`);
      }),
    );

  groups
    .command('rm')
    .description('unregister a group (its files stay)')
    .argument('<folder>')
    .action(
      action((ctx, folder: string) => {
        if (!audited(ctx, (db) => removeGroup(db, folder))) throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder} removed`);
      }),
    );
}

/** `gated groups config | agent | threads`: what a group's agent gets, and how its chats map to sessions. */
function settingCommands(groups: Command): void {
  groups
    .command('config')
    .description(
      "what the group's agent will get: agent, model, instructions, skills, MCP servers and their tools, " +
        'commands, tool rules; and every configuration file it could not use',
    )
    .argument('<folder>')
    .option('--no-tools', 'do not start the MCP servers to list their tools')
    .action(
      action(async (ctx, folder: string, opts: { tools: boolean }) => {
        if (!isValidFolder(folder)) throw new UsageError(`bad group folder '${folder}'`);
        const { groupConfigReport } = await import('../group-config-report.js');
        for (const line of await groupConfigReport(ctx.db(), ctx.config, folder, { listTools: opts.tools }))
          ctx.out(line);
      }),
    );

  groups
    .command('agent')
    .description("set the group's agent (claude, codex or an agent profile) and model")
    .argument('<folder>')
    .argument('<agent>', "'claude', 'codex', a profile name, or 'default'")
    .argument('[model]', "the model (omitted or 'default': the agent's default)")
    .action(
      action((ctx, folder: string, agent: string, model?: string) => {
        const choice = {
          agent: agent === 'default' ? null : agent,
          model: model === undefined || model === 'default' ? null : model,
        };
        const nowhere = danglingAgent(ctx.db({ readOnly: true }), choice.agent);
        if (nowhere) throw new UsageError(`${nowhere.replace(/: every run fails$/, '')}: nothing changed`);
        if (!audited(ctx, (db) => new AgentStore(db).setChoice(folder, choice)))
          throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder}: agent ${choice.agent ?? 'claude'}, model ${choice.model ?? 'default'}`);
      }),
    );

  groups
    .command('threads')
    .description(
      "what a platform thread (Slack thread, forum topic, mail thread) is to the group: 'topics' (each " +
        "thread its own session, the default) or 'replies' (the chat one session, answers in the thread)",
    )
    .argument('<folder>')
    .argument('<mode>', "'topics' or 'replies'")
    .action(
      action((ctx, folder: string, mode: string) => {
        if (mode !== 'topics' && mode !== 'replies') {
          throw new UsageError(`bad thread mode '${mode}': 'topics' or 'replies'`);
        }
        if (!audited(ctx, (db) => setThreadMode(db, folder, mode)))
          throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder}: threads as ${mode}`);
      }),
    );
}

/** `gated groups busy | network`: how the group's runs take messages and reach the network. */
function runCommands(groups: Command): void {
  groups
    .command('busy')
    .description(
      "what a message does while the group's agent works on a turn: 'queue' (the next turn, the default), " +
        "'steer' (shown to the model inside the turn in progress) or 'interrupt' (stops that turn first)",
    )
    .argument('<folder>')
    .argument('<mode>', "'queue', 'steer' or 'interrupt'")
    .action(
      action((ctx, folder: string, mode: string) => {
        if (mode !== 'queue' && mode !== 'steer' && mode !== 'interrupt') {
          throw new UsageError(`bad busy mode '${mode}': 'queue', 'steer' or 'interrupt'`);
        }
        if (!audited(ctx, (db) => setBusyMode(db, folder, mode)))
          throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder}: busy ${mode}`);
      }),
    );

  groups
    .command('network')
    .description(
      "the docker network the group's containers join (docker and swarm runtimes): 'bridge', 'host', a " +
        "network made with 'docker network create' (an overlay on a swarm), or 'none' (the default)",
    )
    .argument('<folder>')
    .argument('<network>', "a docker network name, or 'none'")
    .action(
      action((ctx, folder: string, network: string) => {
        if (!audited(ctx, (db) => setNetwork(db, folder, network)))
          throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder}: network ${networkOf(network, folder) ?? 'none'}`);
      }),
    );
}

/** The network column as `groups list` shows it: the name, `none`, or the stored value marked bad. */
function networkShown(g: Group): string {
  try {
    return networkOf(g.network, g.folder) ?? 'none';
  } catch {
    return `bad: ${String(g.network)}`;
  }
}

/** `gated groups autonomy FOLDER LEVEL`: the preset for the tool calls no rule decides. */
function autonomyCommand(groups: Command): void {
  groups
    .command('autonomy')
    .description(
      'what the tool calls no tool rule decides get (docs/APPROVALS.md): ' +
        "'read_only' (reads run, everything else is refused), 'supervised' (reads run, anything that may " +
        "write or execute is asked about; the default) or 'full' (everything runs)",
    )
    .argument('<folder>')
    .argument('<level>', AUTONOMY_LEVELS.join(' | '))
    .action(
      action((ctx, folder: string, level: string) => {
        const l = autonomyOf(level);
        if (l === null) throw new UsageError(`bad autonomy '${level}': ${AUTONOMY_LEVELS.join(', ')}`);
        if (!audited(ctx, (db) => setAutonomy(db, folder, l))) throw new UsageError(`no group '${folder}'`);
        ctx.out(`group ${folder}: autonomy ${l}`);
      }),
    );
}
