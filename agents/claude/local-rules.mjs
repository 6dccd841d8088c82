// What the Claude agent allows by itself, before gated's tool rules are asked (docs/AGENTS.md, "Tools"): file
// tools inside the group's folder (links resolved), reading (never writing) the group's configuration
// folders, the group's MCP servers' tools, gated's own tools, shells only where the operator allowed them.
import { existsSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { SERVER } from './actions.mjs';
import { insideAny } from './config.mjs';

/** True when `p` (absolute or relative to `cwd`) stays inside `cwd`, links resolved. */
export function insideFolder(p, cwd) {
  if (typeof p !== 'string' || p === '') return true;
  let abs = isAbsolute(p) ? p : resolve(cwd, p);
  // The file may not exist yet: resolve the nearest existing ancestor.
  let probe = abs;
  while (!existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe);
  try {
    abs = join(realpathSync(probe), relative(probe, abs));
  } catch {
    return false;
  }
  const rel = relative(realpathSync(cwd), abs);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

export const FILE_TOOLS = new Set([
  'Read',
  'Write',
  'Edit',
  'MultiEdit',
  'NotebookEdit',
  'Glob',
  'Grep',
  'LS',
]);
const READ_TOOLS = new Set(['Read', 'Glob', 'Grep', 'LS']);
export const SHELL_TOOLS = new Set(['Bash', 'BashOutput', 'KillShell']);

/**
 * What this agent allows by itself: file tools inside the folder, reading (never writing) the group's
 * configuration folders; the group's MCP servers' tools; shells only where the operator allowed them.
 * `configured` holds the group's read-only folders (`dirs`) and MCP server names (`servers`).
 */
export function localPermission(name, input, { cwd, configured, allowShell }) {
  if (FILE_TOOLS.has(name)) {
    const paths = [input.file_path, input.notebook_path, input.path].filter((p) => p !== undefined);
    if (paths.some((p) => insideAny(p, configured.dirs, cwd)) && !READ_TOOLS.has(name))
      return { behavior: 'deny', message: 'The configuration folder is read-only.' };
    const readable = (p) =>
      insideFolder(p, cwd) || (READ_TOOLS.has(name) && insideAny(p, configured.dirs, cwd));
    if (paths.every(readable)) return { behavior: 'allow', updatedInput: input };
    return { behavior: 'deny', message: 'Only files inside the working directory may be used.' };
  }
  if (SHELL_TOOLS.has(name) && allowShell) return { behavior: 'allow', updatedInput: input };
  if (name === 'TodoWrite' || name.startsWith(`mcp__${SERVER}__`))
    return { behavior: 'allow', updatedInput: input };
  const server = /^mcp__(.+?)__/.exec(name)?.[1];
  if (server !== undefined && configured.servers.has(server))
    return { behavior: 'allow', updatedInput: input };
  return { behavior: 'deny', message: `The tool ${name} is not available here.` };
}
