// The Codex CLI's settings for one run (`--config` overrides through the SDK): the model provider gated
// defines (the Responses API at OPENAI_BASE_URL, no websockets, no calls elsewhere), and the group's
// configuration (docs/AGENTS.md) as developer instructions and MCP servers.

/** `${NAME}` in an MCP server's settings becomes the secret NAME. */
function fill(value, secrets) {
  return String(value).replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name) =>
    typeof secrets?.[name] === 'string' ? secrets[name] : whole,
  );
}

function fillAll(map, secrets) {
  return Object.fromEntries(Object.entries(map ?? {}).map(([k, v]) => [k, fill(v, secrets)]));
}

/** The developer instructions: the operator's instructions, then the skills and where they are. */
function instructionsOf(config) {
  const parts = [
    'You are answering a chat through a gateway. Each user turn holds <message> elements from the chat ' +
      '(with the chat and platform each came from). Answer in Markdown; keep it short unless asked otherwise.',
  ];
  if (typeof config?.instructions === 'string' && config.instructions.trim() !== '')
    parts.push(`Standing instructions of the operator for this chat:\n${config.instructions.trim()}`);
  const skills = Array.isArray(config?.skills) ? config.skills : [];
  if (skills.length > 0)
    parts.push(
      'Skills you have (read its SKILL.md when one applies, and follow it):\n' +
        skills.map((s) => `- ${s.name}: ${s.description || '(no description)'} (${s.path})`).join('\n'),
    );
  return parts.join('\n\n');
}

function mcpServersOf(config, secrets) {
  const out = {};
  for (const [name, s] of Object.entries(config?.mcpServers ?? {})) {
    out[name] =
      s.type === 'stdio'
        ? {
            command: fill(s.command, secrets),
            args: (s.args ?? []).map((a) => fill(a, secrets)),
            env: fillAll(s.env, secrets),
          }
        : { url: fill(s.url, secrets), http_headers: fillAll(s.headers, secrets) };
  }
  return out;
}

/** The SDK's `config` (flattened into `--config key=value` by the SDK). */
export function configOf(first, secrets) {
  const servers = mcpServersOf(first.config, secrets);
  return {
    model_provider: 'gated',
    model_providers: {
      gated: {
        name: 'gated',
        base_url: secrets.OPENAI_BASE_URL ?? 'https://api.openai.com/v1',
        env_key: 'OPENAI_API_KEY',
        wire_api: 'responses',
        supports_websockets: false,
        // gated retries a run the API could not serve; one quick try here.
        request_max_retries: Number(secrets.CODEX_REQUEST_MAX_RETRIES ?? 1),
        stream_max_retries: Number(secrets.CODEX_STREAM_MAX_RETRIES ?? 1),
      },
    },
    developer_instructions: instructionsOf(first.config),
    check_for_update_on_startup: false,
    analytics: { enabled: false },
    ...(Object.keys(servers).length > 0 ? { mcp_servers: servers } : {}),
  };
}

/** An API failure that a later try may not meet (the run is retried rather than answered). */
export function transient(text) {
  return /overloaded|\b5\d\d\b|rate.?limit|\b429\b|ECONNREFUSED|ETIMEDOUT|ECONNRESET|stream disconnected|error sending request|connection/i.test(
    text ?? '',
  );
}
