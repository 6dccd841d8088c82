import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { packageFile } from '../core/paths.js';
import { UsageError } from '../core/errors.js';
import { action } from './context.js';

/** A module of commands: what registers them on the program. */
type Registrar = (program: Command) => void;

/**
 * The commands' modules, in the order `gated --help` lists them, each with the top-level commands it
 * registers: a call loads only the module of its command (a module brings in the stores and helpers it
 * uses: loading all of them cost every CLI call about 40 ms). `--help`, `help` and an unknown word load
 * all. test/gated/cli-modules.test.ts checks that each module registers exactly the names listed here.
 */
export const COMMAND_MODULES: readonly { names: readonly string[]; load: () => Promise<Registrar[]> }[] = [
  { names: ['init', 'send'], load: async () => [(await import('./commands/messages.js')).messagesCommands] },
  { names: ['routes'], load: async () => [(await import('./commands/routes.js')).routesCommand] },
  { names: ['tools', 'approvals'], load: async () => [(await import('./commands/tools.js')).toolsCommand] },
  { names: ['groups'], load: async () => [(await import('./commands/groups.js')).groupsCommand] },
  { names: ['worktrees'], load: async () => [(await import('./commands/worktrees.js')).worktreesCommand] },
  { names: ['access'], load: async () => [(await import('./commands/access.js')).accessCommand] },
  { names: ['audit'], load: async () => [(await import('./commands/access.js')).auditCommand] },
  { names: ['status'], load: async () => [(await import('./commands/status.js')).statusCommand] },
  { names: ['runs', 'receipts'], load: async () => [(await import('./commands/runs.js')).runsCommands] },
  { names: ['usage', 'prices'], load: async () => [(await import('./commands/usage.js')).usageCommands] },
  { names: ['memory'], load: async () => [(await import('./commands/memory.js')).memoryCommand] },
  { names: ['tasks'], load: async () => [(await import('./commands/tasks.js')).tasksCommand] },
  { names: ['workflows'], load: async () => [(await import('./commands/workflows.js')).workflowsCommand] },
  { names: ['backup', 'restore'], load: async () => [(await import('./commands/backup.js')).backupCommands] },
  { names: ['doctor'], load: async () => [(await import('./commands/doctor.js')).doctorCommand] },
];

/** The commands defined here rather than in a module. */
const OWN_COMMANDS = ['run', 'chat'];

/** The version in package.json (the file ships with gated, in the image too). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string }).version;
}

/**
 * Builds the `gated` command line: with `command`, only that command's module is loaded (and none for
 * `run` or `chat`); without, every module.
 */
export async function buildProgram(command?: string): Promise<Command> {
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

  const needed =
    command === undefined ? COMMAND_MODULES : COMMAND_MODULES.filter((m) => m.names.includes(command));
  for (const registrars of await Promise.all(needed.map((m) => m.load())))
    for (const register of registrars) register(program);
  return program;
}

/** Runs the CLI; bad input prints one line naming the problem and exits 2. */
export async function main(argv: string[]): Promise<void> {
  try {
    const word = commandWord(argv.slice(2));
    const program = await buildProgram(word === null ? undefined : word);
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
 * The command a call names: the first word that is not an option (or the value of `--db`); `run` when
 * there is none (the default command), null for `help` or when only options are given (`--help`,
 * `--version`: every module is loaded for the full list). `run` being the default, commander would read
 * `gated stauts` as `gated run stauts` and answer "too many arguments for 'run'": a word that names no
 * command is refused here.
 */
function commandWord(args: string[]): string | null {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--db') i++;
    else if (a.startsWith('-')) {
      if (a === '-h' || a === '--help' || a === '-V' || a === '--version') return null;
    } else {
      const known = [...OWN_COMMANDS, ...COMMAND_MODULES.flatMap((m) => m.names)];
      if (a === 'help') return null;
      if (!known.includes(a)) {
        throw new UsageError(`unknown command '${a}' (commands: ${known.join(', ')}; see gated --help)`);
      }
      return a;
    }
  }
  return 'run';
}
