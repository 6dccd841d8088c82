import { existsSync } from 'node:fs';
import {
  ConfigFileError,
  isConfigDir,
  listConfigDir,
  readConfigFile,
  readTracked,
  type ConfigSnapshot,
} from './config-files.js';
import { folderChain } from './types.js';
import { NO_VOICE, parseVoiceJson, type VoiceSettings } from './voice-settings.js';

/**
 * A group's operator-owned configuration (docs/AGENTS.md): standing instructions, skills, MCP servers and
 * chat commands, read from `GATED_CONFIG_DIR/<folder>/`. Each of the four parts comes from the nearest
 * folder, the group's own first and then its ancestors', that has it: a child group uses its parent's
 * configuration where it has none of its own. A part that cannot be read is reported and left out; nothing
 * here throws for what a file contains.
 */

/** A configuration file that could not be used, relative to the configuration root, and why. */
export interface ConfigProblem {
  file: string;
  reason: string;
}

/** One skill: `skills/<name>/SKILL.md` of the folder `from`. */
export interface Skill {
  name: string;
  /** The `description:` of its front matter (empty when it has none). */
  description: string;
  /** The group folder whose configuration holds it. */
  from: string;
  /** Its SKILL.md, relative to the configuration root. */
  file: string;
}

/** An MCP server as mcp.json describes it: a command the agent starts (stdio) or a URL. */
export type McpServer =
  | { type: 'stdio'; command: string; args: string[]; env: Record<string, string> }
  | { type: 'http' | 'sse'; url: string; headers: Record<string, string> };

/** A chat command: `commands/<name>.md` of the folder `from`. */
export interface ChatCommand {
  name: string;
  text: string;
  from: string;
  file: string;
}

/** What a group's agent gets from its configuration folder(s). */
export interface GroupConfig {
  folder: string;
  /** CLAUDE.md then AGENTS.md of the nearest folder with either, joined (empty: none). */
  instructions: string;
  /** The files `instructions` came from, relative to the configuration root. */
  instructionFiles: string[];
  skills: Skill[];
  mcpServers: Record<string, McpServer>;
  /** The mcp.json the servers came from, relative to the root (null: none). */
  mcpFile: string | null;
  commands: ChatCommand[];
  /** voice.json of the nearest folder that has one (transcription language, spoken replies). */
  voice: VoiceSettings;
  /** The voice.json the settings came from, relative to the root (null: none). */
  voiceFile: string | null;
  /** The group folders whose configuration the parts came from (what a container must see). */
  sources: string[];
  problems: ConfigProblem[];
}

/** A command or skill name: lowercase letters, digits, `-` and `_`. */
const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/** An MCP server name; `gated` is the gateway's own tool server. */
const SERVER = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** The value of `key:` in a Markdown file's leading `---` front matter, if any. */
export function frontMatter(text: string, key: string): string | undefined {
  const m = /^---\r?\n([\s\S]*?)\r?\n---/.exec(text);
  if (!m) return undefined;
  for (const line of m[1]!.split(/\r?\n/)) {
    const kv = /^([A-Za-z_-]+):\s*(.*)$/.exec(line);
    if (kv && kv[1] === key) return kv[2]!.replace(/^(['"])(.*)\1$/, '$2').trim();
  }
  return undefined;
}

function stringMap(v: unknown, what: string): Record<string, string> {
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${what} must be an object`);
  for (const [k, x] of Object.entries(v))
    if (typeof x !== 'string') throw new Error(`${what}.${k} must be a string`);
  return v as Record<string, string>;
}

/** One mcp.json server entry, or why it cannot be used. */
function mcpServer(v: unknown): McpServer {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('must be an object');
  const s = v as Record<string, unknown>;
  const type = s.type ?? (s.url !== undefined ? 'http' : 'stdio');
  if (type === 'stdio') {
    if (typeof s.command !== 'string' || s.command === '') throw new Error('needs a "command"');
    const args = s.args ?? [];
    if (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))
      throw new Error('"args" must be a list of strings');
    return { type, command: s.command, args: args as string[], env: stringMap(s.env, 'env') };
  }
  if (type === 'http' || type === 'sse') {
    if (typeof s.url !== 'string' || !/^https?:\/\//.test(s.url)) throw new Error('needs an http(s) "url"');
    return { type, url: s.url, headers: stringMap(s.headers, 'headers') };
  }
  throw new Error(`unknown type '${String(type)}'`);
}

/** Parses mcp.json text: the servers that can be used, and a problem for each that cannot. */
export function parseMcpJson(
  text: string,
  file: string,
): { servers: Record<string, McpServer>; problems: ConfigProblem[] } {
  const servers: Record<string, McpServer> = {};
  const problems: ConfigProblem[] = [];
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return { servers, problems: [{ file, reason: `not valid JSON: ${(err as Error).message}` }] };
  }
  const list = (doc as { mcpServers?: unknown } | null)?.mcpServers;
  if (typeof list !== 'object' || list === null || Array.isArray(list))
    return { servers, problems: [{ file, reason: 'has no "mcpServers" object' }] };
  for (const [name, v] of Object.entries(list)) {
    if (!SERVER.test(name) || name === 'gated') {
      problems.push({
        file,
        reason: `server name '${name}' is not allowed (letters, digits, - and _; not 'gated')`,
      });
      continue;
    }
    try {
      servers[name] = mcpServer(v);
    } catch (err) {
      problems.push({ file, reason: `server '${name}' ${(err as Error).message}` });
    }
  }
  return { servers, problems };
}

/** Runs `fn`, turning a ConfigFileError (or any read failure) into a problem and `fallback`. */
function guarded<T>(problems: ConfigProblem[], file: string, fallback: T, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const reason = err instanceof ConfigFileError ? err.message : `cannot be read: ${(err as Error).message}`;
    problems.push({ file, reason });
    return fallback;
  }
}

/** The nearest folder of the chain for which `has` is true (null: none). */
function nearest(chain: readonly string[], has: (folder: string) => boolean): string | null {
  return chain.find(has) ?? null;
}

function readSkills(root: string, from: string, problems: ConfigProblem[]): Skill[] {
  const skills: Skill[] = [];
  for (const e of listConfigDir(root, `${from}/skills`)) {
    const dir = `${from}/skills/${e.name}`;
    if (e.kind !== 'dir' || !NAME.test(e.name)) {
      problems.push({
        file: dir,
        reason: 'is not a skill folder (skills/<name>/SKILL.md, name in a-z0-9_-)',
      });
      continue;
    }
    const file = `${dir}/SKILL.md`;
    const text = guarded(problems, file, null, () => readConfigFile(root, file));
    if (text === null) {
      if (!problems.some((p) => p.file === file)) problems.push({ file, reason: 'is missing' });
      continue;
    }
    skills.push({ name: e.name, description: frontMatter(text, 'description') ?? '', from, file });
  }
  return skills;
}

function readCommands(root: string, from: string, problems: ConfigProblem[]): ChatCommand[] {
  const commands: ChatCommand[] = [];
  for (const e of listConfigDir(root, `${from}/commands`)) {
    const file = `${from}/commands/${e.name}`;
    const name = e.name.replace(/\.md$/, '');
    if (e.kind !== 'file' || !e.name.endsWith('.md') || !NAME.test(name)) {
      problems.push({ file, reason: 'is not a command file (commands/<name>.md, name in a-z0-9_-)' });
      continue;
    }
    const text = guarded(problems, file, null, () => readConfigFile(root, file));
    if (text !== null) commands.push({ name, text, from, file });
  }
  return commands;
}

function readInstructions(root: string, from: string, problems: ConfigProblem[]) {
  const texts: string[] = [];
  const files: string[] = [];
  for (const name of ['CLAUDE.md', 'AGENTS.md']) {
    const file = `${from}/${name}`;
    const text = guarded(problems, file, null, () => readConfigFile(root, file));
    if (text !== null && text.trim() !== '') {
      texts.push(text.trim());
      files.push(file);
    }
  }
  return { text: texts.join('\n\n'), files };
}

// Each group's configuration as last read, with what its files looked like then; most runs of a group
// find them unchanged, and a check of their stamps costs a few lstat calls instead of the walk and reads.
const cache = new Map<string, { config: GroupConfig; snapshot: ConfigSnapshot }>();
const CACHE_MAX = 10_000;

/**
 * The configuration of `folder` under `root` (GATED_CONFIG_DIR). Never throws for file contents. Read
 * again whenever any file or folder it came from, or looked for, changed (`ConfigSnapshot`): an edit is
 * seen by the next call. The result is shared between callers: read it, do not change it.
 */
export function readGroupConfig(root: string, folder: string): GroupConfig {
  // No configuration folder at all (the default ./data/config never made): one look at the root, and no
  // entry kept per group (a gateway of 10,000 groups without one made and stamped one for each).
  if (!existsSync(root)) return noConfig(folder);
  const key = `${root}\0${folder}`;
  const hit = cache.get(key);
  if (hit?.snapshot.unchanged()) return hit.config;
  cache.delete(key);
  const { value, snapshot } = readTracked(root, () => readNow(root, folder));
  if (snapshot.settled) {
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(key, { config: value, snapshot });
  }
  return value;
}

/** What a group gets where there is no configuration folder at all. */
function noConfig(folder: string): GroupConfig {
  const none = { instructions: '', instructionFiles: [], skills: [], mcpServers: {}, mcpFile: null };
  return { folder, ...none, commands: [], ...NO_VOICE, sources: [], problems: [] };
}

function readNow(root: string, folder: string): GroupConfig {
  // The root went away since readGroupConfig looked: nothing to walk or report.
  if (!existsSync(root)) return noConfig(folder);
  const problems: ConfigProblem[] = [];
  const chain = folderChain(folder);
  const exists = (rel: string, dir: boolean) =>
    guarded(problems, rel, false, () => (dir ? isConfigDir(root, rel) : readConfigFile(root, rel) !== null));
  // A link or unreadable folder anywhere on the chain is reported once and counts as absent.
  const usable = chain.filter((f) => exists(f, true));

  const instrFrom = nearest(usable, (f) =>
    ['CLAUDE.md', 'AGENTS.md'].some(
      (n) => exists(`${f}/${n}`, false) || problems.some((p) => p.file === `${f}/${n}`),
    ),
  );
  const instructions = instrFrom ? readInstructions(root, instrFrom, problems) : { text: '', files: [] };

  const skillsFrom = nearest(usable, (f) => exists(`${f}/skills`, true));
  const skills = skillsFrom
    ? guarded(problems, `${skillsFrom}/skills`, [], () => readSkills(root, skillsFrom, problems))
    : [];

  const mcpFrom = nearest(
    usable,
    (f) => exists(`${f}/mcp.json`, false) || problems.some((p) => p.file === `${f}/mcp.json`),
  );
  let mcpServers: Record<string, McpServer> = {};
  if (mcpFrom) {
    const file = `${mcpFrom}/mcp.json`;
    const text = guarded(problems, file, null, () => readConfigFile(root, file));
    if (text !== null) {
      const parsed = parseMcpJson(text, file);
      mcpServers = parsed.servers;
      problems.push(...parsed.problems);
    }
  }

  const commandsFrom = nearest(usable, (f) => exists(`${f}/commands`, true));
  const commands = commandsFrom
    ? guarded(problems, `${commandsFrom}/commands`, [], () => readCommands(root, commandsFrom, problems))
    : [];

  const voice = readVoice(root, usable, exists, problems);

  const sources = [...new Set([instrFrom, skillsFrom, mcpFrom, commandsFrom].filter((f) => f !== null))];
  // A problem found twice (once while looking, once while reading) is reported once.
  const seen = new Set<string>();
  const unique = problems.filter((p) => {
    const k = `${p.file}\0${p.reason}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  return {
    folder,
    instructions: instructions.text,
    instructionFiles: instructions.files,
    skills,
    mcpServers,
    mcpFile: mcpFrom ? `${mcpFrom}/mcp.json` : null,
    commands,
    ...voice,
    sources,
    problems: unique,
  };
}

/** voice.json of the nearest folder of the chain that has one. */
function readVoice(
  root: string,
  usable: readonly string[],
  exists: (rel: string, dir: boolean) => boolean,
  problems: ConfigProblem[],
): { voice: VoiceSettings; voiceFile: string | null } {
  const from = nearest(usable, (f) => exists(`${f}/voice.json`, false));
  if (from === null) return NO_VOICE;
  const file = `${from}/voice.json`;
  const text = guarded(problems, file, null, () => readConfigFile(root, file));
  if (text === null) return { ...NO_VOICE, voiceFile: file };
  const parsed = parseVoiceJson(text, file);
  problems.push(...parsed.problems);
  return { voice: parsed.voice, voiceFile: file };
}

/**
 * The text a chat command becomes for the agent: the file's text with every `$ARGUMENTS` replaced by the
 * rest of the message (trimmed).
 */
export function expandCommand(command: ChatCommand, rest: string): string {
  return command.text.split('$ARGUMENTS').join(rest.trim());
}

/** Splits `/name rest` into the command name (lowercased) and the rest; undefined for anything else. */
export function slashWord(content: string): { name: string; rest: string } | undefined {
  const m = /^\s*\/([A-Za-z0-9][A-Za-z0-9_-]{0,31})(?:@[A-Za-z0-9_]+)?(?:\s+([\s\S]*))?$/.exec(content);
  if (!m) return undefined;
  return { name: m[1]!.toLowerCase(), rest: m[2] ?? '' };
}

/**
 * The chat command `name` of `folder` (from the nearest folder of its chain that has `commands/`), or
 * undefined. Reads one file; a file that cannot be read counts as no command and is reported to `onProblem`.
 */
export function findCommand(
  root: string,
  folder: string,
  name: string,
  onProblem: (p: ConfigProblem) => void,
): ChatCommand | undefined {
  if (!NAME.test(name)) return undefined;
  const problems: ConfigProblem[] = [];
  const from = nearest(folderChain(folder), (f) =>
    guarded(problems, `${f}/commands`, false, () => isConfigDir(root, `${f}/commands`)),
  );
  let found: ChatCommand | undefined;
  if (from !== null) {
    const file = `${from}/commands/${name}.md`;
    const text = guarded(problems, file, null, () => readConfigFile(root, file));
    if (text !== null) found = { name, text, from, file };
  }
  problems.forEach(onProblem);
  return found;
}

/** The names of `folder`'s chat commands, sorted (files that cannot be used are left out). */
export function commandNames(root: string, folder: string): string[] {
  const problems: ConfigProblem[] = [];
  const from = nearest(folderChain(folder), (f) =>
    guarded(problems, `${f}/commands`, false, () => isConfigDir(root, `${f}/commands`)),
  );
  if (from === null) return [];
  return guarded(problems, `${from}/commands`, [], () => listConfigDir(root, `${from}/commands`))
    .filter((e) => e.kind === 'file' && e.name.endsWith('.md') && NAME.test(e.name.slice(0, -3)))
    .map((e) => e.name.slice(0, -3));
}
