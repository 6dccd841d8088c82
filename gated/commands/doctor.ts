import { dirname } from 'node:path';
import type { Command } from 'commander';
import type { Config } from '../../core/config.js';
import { action } from '../context.js';
import { bundledAgentsFinding } from '../doctor-agents.js';
import { channelChecks, engineCheck } from '../doctor-remote.js';
import {
  databaseFinding,
  diskFinding,
  doctorLines,
  namesFinding,
  writableDir,
  type Finding,
} from '../doctor.js';

/**
 * Everything `gated doctor` checks for `config`, in the order printed: folders, database, disk, the names the
 * database points to (routes, agents, tasks, limits), the bundled
 * agents' packages (process runtime, when a command runs one), the engine (docker and swarm runtimes), then
 * each configured channel by a harmless authenticated call.
 */
export async function diagnose(config: Config): Promise<Finding[]> {
  const findings: Finding[] = [
    writableDir('data folder', dirname(config.db), 'GATED_DB'),
    writableDir('groups folder', config.groupsDir, 'GATED_GROUPS_DIR'),
    databaseFinding(config.db),
    diskFinding(config.db),
  ];
  const names = namesFinding(config.db);
  if (names) findings.push(names);
  const agents = bundledAgentsFinding(config);
  if (agents) findings.push(agents);
  if (config.runtime !== 'process') findings.push(await engineCheck(config));
  findings.push(...(await channelChecks(config)));
  return findings;
}

/** `gated doctor`: checks the setup, prints what to fix, exits 1 when something is wrong. */
export function doctorCommand(program: Command): void {
  program
    .command('doctor')
    .description('check the database, folders, disk, agents, engine and channel credentials; say what to fix')
    .action(
      action(async (ctx) => {
        const findings = await diagnose(ctx.config);
        for (const line of doctorLines(findings)) ctx.out(line);
        return findings.some((f) => f.status === 'fail') ? 1 : 0;
      }),
    );
}
