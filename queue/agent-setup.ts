import { join, posix } from 'node:path';
import type { Config } from '../core/config.js';
import { readGroupConfig, type ConfigProblem, type McpServer } from '../core/group-config.js';
import { groupDirOf } from '../core/group-dir.js';
import { folderChain, isValidFolder, type SessionKey } from '../core/types.js';
import { AgentStore, BUILT_IN_AGENTS, type AgentChoice } from '../store/agents.js';
import { networkOf } from '../store/groups.js';
import type { GroupRow } from '../store/queue.js';
import { WorkflowStore } from '../store/workflows.js';
import type { Logger } from '../core/log.js';
import type { Db } from '../store/db.js';
import type { AgentConfigInput, AgentInput } from './prompt.js';
import { CONFIG_ROOT, parseMountList } from './runtime/mounts.js';
import type { ConfigMount, RunSpec } from './runtime/types.js';

/**
 * What one run of a group gets besides its messages (docs/AGENTS.md): which agent and model, its
 * configuration (instructions, skills, MCP servers, the folders it may read but never write), and the
 * secrets meant for it. Decided once per run, from the database and the configuration folders; with the
 * group's row, what the runtime starts the run with (runSpecOf).
 */

/** One run's agent settings: for the input line and for the runtime. */
export interface AgentSetup {
  agent: string;
  model: string | null;
  config: AgentConfigInput;
  secrets: Record<string, string>;
  /** The image of the agent's profile (container runtimes; the group's own image still wins). */
  image: string | null;
  /** The command of the agent's profile (process runtime). */
  command: string | null;
  /** Configuration folders to mount read-only (container runtimes). */
  mounts: ConfigMount[];
  /** Configuration files that could not be used (reported by the caller, never fatal). */
  problems: ConfigProblem[];
}

/** A group names an agent that is neither built in nor an agent_profiles row. */
export class UnknownAgentError extends Error {
  override readonly name = 'UnknownAgentError';
}

type SetupConfig = Pick<
  Config,
  'configDir' | 'agentSecrets' | 'groupSecrets' | 'claudeModel' | 'codexModel' | 'codexCmd' | 'codexImage'
>;

function substitute(s: string, dir: string): string {
  return s.split('${CONFIG_DIR}').join(dir);
}

function withDir(server: McpServer, dir: string): McpServer {
  const map = (o: Record<string, string>) =>
    Object.fromEntries(Object.entries(o).map(([k, v]) => [k, substitute(v, dir)]));
  return server.type === 'stdio'
    ? {
        ...server,
        command: substitute(server.command, dir),
        args: server.args.map((a) => substitute(a, dir)),
        env: map(server.env),
      }
    : { ...server, url: substitute(server.url, dir), headers: map(server.headers) };
}

/**
 * Makes the per-run setup. `containers`: the runtime runs agents in containers, so configuration folders
 * are mounted under CONFIG_ROOT and named by that path; otherwise the agent gets the host paths.
 */
export function agentSetupOf(
  db: Db,
  config: SetupConfig,
  containers: boolean,
): (group: string, topic?: string, choice?: AgentChoice) => AgentSetup {
  const agents = new AgentStore(db);
  const workflows = new WorkflowStore(db);
  const seen = (rel: string) => (containers ? posix.join(CONFIG_ROOT, rel) : join(config.configDir, rel));
  return (group, topic, known) => {
    // The scheduler read the group's row for the run already (`known`): its agent and model are in it.
    const groupChoice = known ?? agents.choice(group);
    // A workflow step's session runs the step's agent and model where it names them (docs/WORKFLOWS.md).
    const step = topic ? workflows.stepChoice(group, topic) : undefined; // a step's topic is never ''
    const choice = {
      agent: step?.agent ?? groupChoice.agent,
      model: step?.model ?? (step?.agent ? null : groupChoice.model),
    };
    const agent = choice.agent ?? 'claude';
    const row = agents.profile(agent);
    const builtIn = (BUILT_IN_AGENTS as readonly string[]).includes(agent);
    if (!row && !builtIn)
      throw new UnknownAgentError(`group '${group}' names agent '${agent}', which has no agent_profiles row`);
    const codex = agent === 'codex';
    const defaultModel = agent === 'claude' ? config.claudeModel : codex ? config.codexModel : undefined;
    const cfg = readGroupConfig(config.configDir, group);
    const mcpDir = cfg.mcpFile ? seen(posix.dirname(cfg.mcpFile)) : '';
    const secrets = { ...config.agentSecrets };
    // Ancestors first: a nearer group's secret of the same name wins.
    for (const f of folderChain(group).reverse()) Object.assign(secrets, config.groupSecrets[f] ?? {});
    return {
      agent,
      model: choice.model ?? row?.model ?? defaultModel ?? null,
      config: {
        ...(cfg.instructions !== '' ? { instructions: cfg.instructions } : {}),
        ...(cfg.skills.length > 0
          ? {
              skills: cfg.skills.map((s) => ({
                name: s.name,
                description: s.description,
                path: seen(s.file),
              })),
            }
          : {}),
        ...(Object.keys(cfg.mcpServers).length > 0
          ? {
              mcpServers: Object.fromEntries(
                Object.entries(cfg.mcpServers).map(([n, s]) => [n, withDir(s, mcpDir)]),
              ),
            }
          : {}),
        readOnly: cfg.sources.map(seen),
      },
      secrets,
      image: row?.image ?? (codex ? config.codexImage : null),
      command: row?.command ?? (codex ? config.codexCmd : null),
      mounts: containers
        ? cfg.sources.map((f) => ({ source: join(config.configDir, f), target: posix.join(CONFIG_ROOT, f) }))
        : [],
      problems: cfg.problems,
    };
  };
}

/** The run's setup (none without a setup function), its unusable configuration files logged. */
export function runSetup(
  setup: ((group: string, topic?: string, choice?: AgentChoice) => AgentSetup) | undefined,
  key: { group: string; topic: string },
  runId: number,
  log: Logger,
  g?: GroupRow,
): AgentSetup | undefined {
  const { group } = key;
  const s = setup?.(group, key.topic, g ? { agent: g.agent ?? null, model: g.model ?? null } : undefined);
  for (const p of s?.problems ?? [])
    log.warn({ runId, group, file: p.file, reason: p.reason }, 'configuration file not used');
  return s;
}

/** The input line's fields from a setup: agent, model, config and secrets (else the shared secrets). */
export function setupFields(
  setup: AgentSetup | undefined,
  secrets: Record<string, string> | undefined,
): Pick<AgentInput, 'agent' | 'model' | 'config' | 'secrets'> {
  if (setup) return { agent: setup.agent, model: setup.model, config: setup.config, secrets: setup.secrets };
  return secrets ? { secrets } : {};
}

/**
 * What the runtime gets to start one run: the group's folder, its container settings (the group's own
 * image before its agent profile's), and from the run's setup the configuration folders to mount read-only
 * and the profile's command. Throws for an invalid folder or a malformed mounts or network column.
 */
export function runSpecOf(
  groupsDir: string,
  key: SessionKey,
  runId: number,
  g: GroupRow | undefined,
  setup: AgentSetup | undefined,
): RunSpec {
  if (!isValidFolder(key.group)) throw new Error(`'${key.group}' is not a valid group folder`);
  return {
    runId,
    group: key.group,
    topic: key.topic,
    groupDir: groupDirOf(groupsDir, key.group),
    image: g?.image ?? setup?.image ?? null,
    network: g?.network == null ? null : networkOf(g.network, key.group),
    mounts: g?.mounts ? parseMountList(g.mounts) : [],
    ...(setup ? { config: setup.mounts, command: setup.command } : {}),
  };
}
