// The group's own configuration (docs/AGENTS.md, "Each group its own agent") as Claude Agent SDK options:
// its instructions and skills in the system prompt, its MCP servers, its model, and the rule that its
// configuration folders may be read but never written.
//
// gated sends all of it in the first stdin line (`config`, `model`), already read and checked; nothing here
// reads settings files of its own (settingSources stays empty), so a file the model writes into its folder
// cannot add a server or widen a rule.
import { isAbsolute, relative, resolve } from 'node:path';

/** `${NAME}` in an MCP server's settings becomes the secret NAME (from the first line's `secrets`). */
function fill(value, secrets) {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name) =>
    typeof secrets?.[name] === 'string' ? secrets[name] : whole,
  );
}

function fillAll(map, secrets) {
  return Object.fromEntries(Object.entries(map ?? {}).map(([k, v]) => [k, fill(String(v), secrets)]));
}

/** The SDK's mcpServers option for the group's servers (none: {}), secrets filled in. */
export function mcpServersOf(config, secrets) {
  const out = {};
  for (const [name, s] of Object.entries(config?.mcpServers ?? {})) {
    if (s.type === 'stdio') {
      out[name] = {
        type: 'stdio',
        command: fill(s.command, secrets),
        args: (s.args ?? []).map((a) => fill(a, secrets)),
        env: fillAll(s.env, secrets),
      };
    } else {
      out[name] = { type: s.type, url: fill(s.url, secrets), headers: fillAll(s.headers, secrets) };
    }
  }
  return out;
}

/** The system prompt's part from the configuration: instructions, then the skills and where they are. */
export function promptOf(config) {
  const parts = [];
  if (typeof config?.instructions === 'string' && config.instructions.trim() !== '')
    parts.push(`Standing instructions of the operator for this chat:\n${config.instructions.trim()}`);
  const skills = Array.isArray(config?.skills) ? config.skills : [];
  if (skills.length > 0) {
    parts.push(
      'Skills you have (read its SKILL.md with the Read tool when one applies, and follow it):\n' +
        skills.map((s) => `- ${s.name}: ${s.description || '(no description)'} (${s.path})`).join('\n'),
    );
  }
  return parts.join('\n\n');
}

/** The configuration folders (absolute paths) the agent may read and must never write. */
export function readOnlyDirs(config) {
  return (Array.isArray(config?.readOnly) ? config.readOnly : []).filter(
    (d) => typeof d === 'string' && isAbsolute(d),
  );
}

/** True when `p` (absolute, or relative to `cwd`) lies inside one of `dirs`. */
export function insideAny(p, dirs, cwd) {
  if (typeof p !== 'string' || p === '') return false;
  const abs = isAbsolute(p) ? resolve(p) : resolve(cwd, p);
  return dirs.some((d) => {
    const rel = relative(d, abs);
    return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
  });
}

/** The model of the run: the input's `model`, else the CLI's default. */
export function modelOf(first) {
  return typeof first.model === 'string' && first.model !== '' ? first.model : undefined;
}
