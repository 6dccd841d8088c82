/**
 * Autonomy (docs/APPROVALS.md, "Autonomy"): a preset rule set per group, applied after the group's own tool
 * rules and its ancestors', which decides every call no rule took. Pure: presets are data, matched against
 * the same tool name and input line (for a shell tool, one canonical simple command) as the rules.
 */

/** How much a group's agent may do without a person: `registered_groups.autonomy`. */
export type Autonomy = 'read_only' | 'supervised' | 'full';

export const AUTONOMY_LEVELS: readonly Autonomy[] = ['read_only', 'supervised', 'full'];

/** What new groups get (the column's default). */
export const DEFAULT_AUTONOMY: Autonomy = 'supervised';

/** A stored value as a level; anything else (a raw edit) is null, and is treated as `supervised`. */
export function autonomyOf(value: unknown): Autonomy | null {
  return (AUTONOMY_LEVELS as readonly unknown[]).includes(value) ? (value as Autonomy) : null;
}

/** Tools that only read: Claude Code's file readers and to-do list, and the common generic names. */
export const READ_TOOLS: ReadonlySet<string> = new Set([
  'Read',
  'Glob',
  'Grep',
  'LS',
  'NotebookRead',
  'TodoWrite',
  'read_file',
  'list_dir',
  'view_image',
]);

/**
 * Programs whose every use only reads (and prints): a shell command of one of them, with no assignment in
 * front, is a read. Left out on purpose, though they mostly read: `git` (a repository's config or
 * attributes can run diff drivers and hooks), `find` (`-fprint` writes), `sort` and `uniq` (write with
 * `-o` or a second operand), `rg` (`--pre` runs a program), `file` (`-C` writes), `date` and `hostname`
 * (set the clock and the name), `tree` (`-o` writes), `less` and `more` (run commands), `env`, `xargs`.
 */
export const READ_PROGRAMS: ReadonlySet<string> = new Set(
  (
    'ls cat head tail wc grep egrep fgrep pwd echo printf true false test [ id whoami uname stat du df ' +
    'which type basename dirname realpath readlink cut tr diff cmp comm nl od md5sum sha1sum sha256sum ' +
    'sha512sum cksum base64 jq ps printenv uptime nproc seq column fold strings'
  ).split(' '),
);

/** gated's own action tools: bounded by the group's `actions` and gated's limits whatever the level. */
const GATED_TOOL = /^mcp__gated__/;

/** A preset's decision, as a rule's. */
export type PresetDecision = 'allow' | 'ask' | 'deny';

/** Tools whose input is a shell command (the same list the rules use). */
export type IsShell = (tool: string) => boolean;

/** A preset's verdict on one call (or one simple command), and which of its entries gave it. */
export interface PresetVerdict {
  decision: PresetDecision;
  /** The entry in words, for explain and notes: `autonomy supervised: reads`. */
  why: string;
}

/**
 * The preset of `level` on one call: for a shell tool `line` is one canonical simple command, else the
 * input line. Every call gets a verdict: presets end with a catch-all.
 */
export function presetDecide(level: Autonomy, tool: string, line: string, isShell: IsShell): PresetVerdict {
  const at = (decision: PresetDecision, what: string): PresetVerdict => ({
    decision,
    why: `autonomy ${level}: ${what}`,
  });
  if (level === 'full') return at('allow', 'everything');
  if (GATED_TOOL.test(tool)) return at('allow', "gated's own tools");
  if (READ_TOOLS.has(tool)) return at('allow', 'a tool that reads');
  if (isShell(tool) && READ_PROGRAMS.has(line.split(' ', 1)[0]!)) return at('allow', 'a command that reads');
  return level === 'read_only'
    ? at('deny', 'only reading is allowed')
    : at('ask', 'a call that may write or execute');
}
