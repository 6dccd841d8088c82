import type { Config } from '../core/config.js';
import type { McpServer } from '../core/group-config.js';
import { readGroupConfig } from '../core/group-config.js';
import { DEFAULT_AUTONOMY } from '../router/autonomy.js';
import { agentSetupOf, type AgentSetup } from '../queue/agent-setup.js';
import type { Db } from '../store/db.js';
import { autonomyReader } from '../store/groups.js';

/**
 * `gated groups config FOLDER`: what the group's agent will get (docs/AGENTS.md) — agent, model,
 * instructions, skills, MCP servers and their tools (each server started once and asked), chat commands,
 * tool rules — and every configuration file that could not be used. Secrets are never printed.
 */

/** How long one MCP server may take to start and list its tools. */
const LIST_TIMEOUT_MS = 15_000;

function fill(value: string, secrets: Record<string, string>): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => secrets[name] ?? whole);
}

function fillMap(map: Record<string, string>, secrets: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(map).map(([k, v]) => [k, fill(v, secrets)]));
}

/**
 * Starts one MCP server as the agent would (secrets filled in) and lists its tools. The MCP SDK is imported
 * here, when tools are listed: at the top it cost every CLI command about 280 ms of loading.
 */
export async function listMcpTools(server: McpServer, secrets: Record<string, string>): Promise<string[]> {
  const [
    { Client },
    { StdioClientTransport, getDefaultEnvironment },
    { StreamableHTTPClientTransport },
    sse,
  ] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/client/sse.js'),
  ]);
  const { SSEClientTransport } = sse;
  const client = new Client({ name: 'gated-groups-config', version: '1.0.0' });
  const transport =
    server.type === 'stdio'
      ? new StdioClientTransport({
          command: fill(server.command, secrets),
          args: server.args.map((a) => fill(a, secrets)),
          env: { ...getDefaultEnvironment(), ...fillMap(server.env, secrets) },
          stderr: 'ignore',
        })
      : server.type === 'http'
        ? new StreamableHTTPClientTransport(new URL(fill(server.url, secrets)), {
            requestInit: { headers: fillMap(server.headers, secrets) },
          })
        : new SSEClientTransport(new URL(fill(server.url, secrets)), {
            requestInit: { headers: fillMap(server.headers, secrets) },
          });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${LIST_TIMEOUT_MS / 1000} s`)),
      LIST_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([
      (async () => {
        await client.connect(transport);
        const { tools } = await client.listTools();
        return tools.map((t) => t.name);
      })(),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => undefined);
  }
}

/** tool_rules rows of the group and its ancestors (§18), when that table exists. */
function rulesOf(db: Db, folder: string): string[] {
  const exists = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tool_rules'`).get();
  if (!exists) return [];
  const rows = db
    .prepare(`SELECT * FROM tool_rules WHERE ? = group_folder OR ? LIKE group_folder || '/%' ORDER BY seq`)
    .all(folder, folder) as Array<Record<string, unknown>>;
  return rows.map((r) =>
    [r.group_folder, r.seq, r.tool, r.input ?? '*', r.decision, r.approvers ?? 'owners']
      .map(String)
      .join(' '),
  );
}

function first(text: string, max = 160): string {
  const line = text.split('\n').find((l) => l.trim() !== '') ?? '';
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

/**
 * What the runtime starts for the group: the command (process runtime) or the image (containers), and the
 * setting or row it comes from. `agent: claude` alone would say Claude where GATED_AGENT_CMD (by default
 * the example agent) runs.
 */
function whatRuns(config: Config, setup: AgentSetup): string {
  if (config.runtime === 'process')
    return setup.command
      ? `${setup.command} (the ${setup.agent} agent's command)`
      : `${config.agentCmd} (GATED_AGENT_CMD)`;
  return setup.image
    ? `image ${setup.image} (the ${setup.agent} agent's image)`
    : `image ${config.agentImage} (GATED_AGENT_IMAGE)`;
}

/** The report's lines. `listTools: false` skips starting the MCP servers. */
export async function groupConfigReport(
  db: Db,
  config: Config,
  folder: string,
  opts: { listTools: boolean } = { listTools: true },
): Promise<string[]> {
  const out: string[] = [];
  const cfg = readGroupConfig(config.configDir, folder);
  let setup: AgentSetup | undefined;
  try {
    setup = agentSetupOf(db, config, config.runtime !== 'process')(folder);
  } catch (err) {
    out.push(`agent: cannot run (${(err as Error).message})`);
  }
  out.push(`configuration: ${config.configDir}/${folder} (parts from: ${cfg.sources.join(', ') || 'none'})`);
  if (setup) {
    out.push(`agent: ${setup.agent}`, `model: ${setup.model ?? "(the agent's default)"}`);
    out.push(`runs: ${whatRuns(config, setup)}`);
  }
  out.push(
    cfg.instructionFiles.length > 0
      ? `instructions: ${cfg.instructionFiles.join(', ')} — ${first(cfg.instructions)}`
      : 'instructions: none',
  );
  out.push(`skills: ${cfg.skills.length === 0 ? 'none' : ''}`);
  for (const s of cfg.skills) out.push(`  ${s.name} (${s.file}): ${s.description || '(no description)'}`);
  const servers = Object.entries(cfg.mcpServers);
  out.push(`mcp servers: ${servers.length === 0 ? 'none' : `from ${cfg.mcpFile}`}`);
  const problems = cfg.problems.map((p) => `${p.file}: ${p.reason}`);
  for (const [name, server] of servers) {
    const what = server.type === 'stdio' ? `${server.command} ${server.args.join(' ')}`.trim() : server.url;
    out.push(`  ${name} (${server.type}: ${what})`);
    if (!opts.listTools) continue;
    const resolved = setup?.config.mcpServers?.[name] ?? server;
    try {
      const tools = await listMcpTools(resolved, setup?.secrets ?? config.agentSecrets);
      out.push(`    tools: ${tools.map((t) => `mcp__${name}__${t}`).join(', ') || 'none'}`);
    } catch (err) {
      out.push('    tools: could not be listed');
      problems.push(`${cfg.mcpFile}: server '${name}' did not list its tools: ${(err as Error).message}`);
    }
  }
  out.push(`commands: ${cfg.commands.map((c) => `/${c.name} (${c.file})`).join(', ') || 'none'}`);
  const rules = rulesOf(db, folder);
  const autonomy = autonomyReader(db)(folder);
  out.push(`autonomy: ${autonomy?.level ?? DEFAULT_AUTONOMY} (decides what no tool rule does)`);
  out.push(`tool rules: ${rules.length === 0 ? 'none' : ''}`);
  for (const r of rules) out.push(`  ${r}`);
  out.push(problems.length === 0 ? 'not used: nothing' : 'not used:');
  for (const p of problems) out.push(`  ${p}`);
  return out;
}
