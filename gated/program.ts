import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { packageFile } from '../core/paths.js';
import { UsageError } from '../core/errors.js';
import { action } from './context.js';
import { accessCommand, auditCommand } from './commands/access.js';
import { backupCommands } from './commands/backup.js';
import { doctorCommand } from './commands/doctor.js';
import { groupsCommand } from './commands/groups.js';
import { worktreesCommand } from './commands/worktrees.js';
import { memoryCommand } from './commands/memory.js';
import { messagesCommands } from './commands/messages.js';
import { routesCommand } from './commands/routes.js';
import { runsCommands } from './commands/runs.js';
import { usageCommands } from './commands/usage.js';
import { toolsCommand } from './commands/tools.js';
import { statusCommand } from './commands/status.js';
import { tasksCommand } from './commands/tasks.js';
import { workflowsCommand } from './commands/workflows.js';

/** The version in package.json (the file ships with gated, in the image too). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string }).version;
}

/** Builds the `gated` command line. Exported so tests can drive it in-process. */
export function buildProgram(): Command {
  const program = new Command('gated')
    .description('a gateway between chat platforms and AI agents, routed by a SQL table')
    .version(packageVersion(), '-V, --version', 'print the version of gated')
    .option('--db <path>', 'SQLite database (default: $GATED_DB, else ./data/gated.db)')
    .showHelpAfterError(false)
    .exitOverride();

  program
    .command('run', { isDefault: true })
    .description('run the gateway daemon (the default)')
    .action(
      action(async (ctx) => {
        const { runDaemon } = await import('./run.js');
        return runDaemon(ctx.config);
      }),
    );

  program
    .command('chat')
    .description('talk to a group from the terminal (the local: platform)')
    .argument('[folder]', 'group folder', 'demo')
    .action(
      action(async (ctx, folder: string) => {
        const { runChat } = await import('./chat.js');
        return runChat(ctx.config, folder, process.stdin, process.stdout);
      }),
    );

  messagesCommands(program);
  routesCommand(program);
  toolsCommand(program);
  groupsCommand(program);
  worktreesCommand(program);
  accessCommand(program);
  auditCommand(program);
  statusCommand(program);
  runsCommands(program);
  usageCommands(program);
  memoryCommand(program);
  tasksCommand(program);
  workflowsCommand(program);
  backupCommands(program);
  doctorCommand(program);
  return program;
}

/** Runs the CLI; bad input prints one line naming the problem and exits 2. */
export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    refuseUnknownCommand(program, argv.slice(2));
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander already printed its message (or the help); map its exits onto ours.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`gated: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    const e = err as { code?: string; message?: string };
    process.stderr.write(`gated: ${e.code ? e.code + ': ' : ''}${e.message ?? String(err)}\n`);
    process.exitCode = 1;
  }
}

/**
 * `run` is the default command, so commander would read `gated stauts` as `gated run stauts` and answer
 * "too many arguments for 'run'". The first word that is not an option (or the value of `--db`) must name a
 * command.
 */
function refuseUnknownCommand(program: Command, args: string[]): void {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--db') i++;
    else if (a.startsWith('-')) continue;
    else {
      const known = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
      if (a !== 'help' && !known.includes(a)) {
        throw new UsageError(`unknown command '${a}' (commands: ${known.join(', ')}; see gated --help)`);
      }
      return;
    }
  }
}
