import { programBase, quoteWord, simpleCommand, type SimpleCommand } from './shell-words.js';

/**
 * A shell tool's command split into its simple commands (docs/APPROVALS.md, "What a shell rule matches").
 * The syntax tree comes from tree-sitter-bash (queue/shell-parser.ts loads it; this file only reads the
 * tree, so it stays pure). What is proven: lists (`;`, `&&`, `||`, `&`, newlines), pipelines, subshells,
 * `{ …; }`, `!`, and commands whose every word is literal (plain, single- or double-quoted without
 * expansions), with redirections only to `/dev/null`, between descriptors or reading a named file.
 * Everything else is unproven and named: expansions and substitutions, heredocs, assignments alone,
 * control flow, functions, syntax errors, and programs that run other commands (`eval`, `sh -c`, `sudo`…).
 * The commands found inside unproven parts are still returned, so a deny rule sees `rm` in `echo $(rm -rf /)`
 * or `bash -c 'rm -rf /'`.
 */

/** The part of a tree-sitter node this file reads (web-tree-sitter's Node has it). */
export interface ShellNode {
  readonly type: string;
  readonly text: string;
  readonly isNamed: boolean;
  readonly isMissing: boolean;
  /** Whether the node or anything below it is a syntax error or a missing token. */
  readonly hasError: boolean;
  readonly children: readonly (ShellNode | null)[];
}

/** Parses `source` and hands the tree's root to `read`; the tree lives only during the call. */
export type ShellParser = <T>(source: string, read: (root: ShellNode) => T) => T;

/** What a shell command is made of. */
export interface ShellSplit {
  /** Every simple command whose words are proven, in source order (inside unproven parts too). */
  commands: SimpleCommand[];
  /** Why the command is not only those simple commands; empty when it is. */
  unproven: string[];
}

/** Programs that run a command or code given in their arguments or input: never proven simple. */
const RUNNERS = new Set(
  (
    'eval exec source . command builtin sudo doas su xargs nohup nice ionice time timeout setsid stdbuf ' +
    'chroot unshare nsenter flock watch parallel busybox env script trap coproc'
  ).split(' '),
);
/** Shells: they run the code in `-c`, a script or their input. */
const SHELLS = new Set('sh bash dash zsh ksh mksh ash fish csh tcsh'.split(' '));
/** find's actions that run a command or delete. */
const FIND_ACTIONS = new Set(['-exec', '-execdir', '-ok', '-okdir', '-delete']);
/** Separators and brackets a list, pipeline, subshell or group may hold. */
const GLUE = new Set(['&&', '||', '|', '|&', ';', '&', '(', ')', '{', '}', '!', '\n']);
/** How deep `bash -c` and `eval` strings are looked into for deny rules. */
const MAX_DEPTH = 3;

/** Splits `source` into its simple commands, naming whatever cannot be proven simple. */
export function splitShell(parse: ShellParser, source: string, depth = 0): ShellSplit {
  const out: ShellSplit = { commands: [], unproven: [] };
  const control = controlChar(source);
  if (control !== null) out.unproven.push(`a control character (U+${control.toString(16).padStart(4, '0')})`);
  // tree-sitter-bash splits `r\<newline>m` into two words where bash joins them into `rm`.
  if (/(^|[^ \t])\\\r?\n/.test(source)) out.unproven.push('a line continuation inside a word');
  parse(source, (root) => {
    if (root.hasError) out.unproven.push('a syntax error');
    new Walker(parse, out, depth).statement(root);
  });
  return out;
}

/** Reads one tree into a ShellSplit. */
class Walker {
  constructor(
    private readonly parse: ShellParser,
    private readonly out: ShellSplit,
    private readonly depth: number,
  ) {}

  private unproven(why: string): void {
    if (!this.out.unproven.includes(why)) this.out.unproven.push(why);
  }

  statement(node: ShellNode): void {
    switch (node.type) {
      case 'program':
      case 'list':
      case 'pipeline':
      case 'subshell':
      case 'compound_statement':
      case 'negated_command':
        for (const c of kids(node)) {
          if (c.isMissing) this.unproven(`a syntax error (missing ${c.type})`);
          else if (c.isNamed) this.statement(c);
          else if (!GLUE.has(c.type)) this.unproven(`'${c.type}' outside its construct`);
        }
        return;
      case 'comment':
        return;
      case 'command':
        return this.command(node);
      case 'redirected_statement':
        for (const c of kids(node)) {
          if (c.type === 'file_redirect') this.redirect(c);
          else if (c.isNamed) this.statement(c);
        }
        return;
      default:
        this.unproven(describe(node));
        this.search(node);
    }
  }

  /** Finds the commands inside an unproven construct, for deny rules. */
  private search(node: ShellNode): void {
    for (const c of kids(node)) {
      if (c.type === 'command') this.command(c);
      else if (c.type === 'ERROR' || c.isMissing) this.unproven('a syntax error');
      else this.search(c);
    }
  }

  private command(node: ShellNode): void {
    const assigns: string[] = [];
    const argv: string[] = [];
    let proven = true;
    let named = false;
    for (const c of kids(node)) {
      if (c.type === 'variable_assignment') {
        const name = c.children[0]?.text ?? '';
        const value = c.children.length > 2 ? this.word(c.children[2]!) : '';
        if (value === null) proven = false;
        else assigns.push(`${name}=${value}`);
      } else if (c.type === 'file_redirect') this.redirect(c);
      else if (c.type === 'command_name') {
        const v = c.children[0] ? this.word(c.children[0]) : null;
        if (v === null) this.unproven('a program name that is not literal');
        else argv.push(v);
        named = v !== null;
      } else if (c.isNamed) {
        const v = this.word(c);
        if (v === null) proven = false;
        else argv.push(v);
      }
    }
    if (!named) {
      if (proven && argv.length === 0) this.unproven('an assignment without a command');
      return;
    }
    // A command with a computed word is unproven (noted where the word was), but what is known of it is
    // still matched against deny rules: `rm -rf $DIR` is `rm -fr`.
    this.out.commands.push(simpleCommand(argv, assigns));
    this.runner(argv);
  }

  /** A program that runs another command: unproven; the command it runs is looked at for deny rules. */
  private runner(argv: string[]): void {
    const name = programBase(argv[0]!);
    const args = argv.slice(1);
    if (SHELLS.has(name)) {
      this.unproven(`a shell (${name}) running code`);
      const c = args.indexOf('-c');
      if (c >= 0 && args[c + 1] !== undefined) this.nested(args[c + 1]!);
    } else if (name === 'eval') {
      this.unproven('eval');
      this.nested(args.join(' '));
    } else if (RUNNERS.has(name) && !(name === 'env' && args.every((a) => a.includes('=')))) {
      this.unproven(`a program that runs another (${name})`);
      // Where the command starts depends on the runner's options: every word that could start it is tried.
      const starts = args.flatMap((a, i) => (a.startsWith('-') || a.includes('=') ? [] : [i])).slice(0, 4);
      for (const i of starts) this.nested(args.slice(i).map(quoteWord).join(' '));
    } else if (name === 'find' && args.some((a) => FIND_ACTIONS.has(a))) {
      this.unproven('find running a command or deleting');
      const at = args.findIndex((a) => FIND_ACTIONS.has(a) && a !== '-delete');
      if (at >= 0)
        this.nested(
          args
            .slice(at + 1)
            .filter((a) => a !== ';' && a !== '+')
            .map(quoteWord)
            .join(' '),
        );
    }
  }

  /** Commands inside a string another program runs, for deny rules. */
  private nested(source: string): void {
    if (this.depth >= MAX_DEPTH) return;
    const inner = splitShell(this.parse, source, this.depth + 1);
    this.out.commands.push(...inner.commands);
  }

  /** A file redirection: proven only to /dev/null, between descriptors, or reading a named file. */
  private redirect(node: ShellNode): void {
    const op = kids(node).find((c) => !c.isNamed)?.type ?? '';
    const dest = kids(node)
      .filter((c) => c.isNamed && c.type !== 'file_descriptor')
      .at(-1);
    const target = dest ? this.word(dest) : null;
    if (target === null) return this.unproven('a redirection to a computed target');
    if (target === '/dev/null') return;
    if ((op === '>&' || op === '<&') && /^(\d+|-)$/.test(target)) return;
    if (op === '<') return;
    this.unproven(`a redirection that writes a file (${op} ${target})`);
  }

  /** A word's value as the program receives it, or null (noted) when the shell would compute it. */
  private word(node: ShellNode): string | null {
    switch (node.type) {
      case 'word':
      case 'number': {
        if (/\{[^}]*(,|\.\.)[^}]*\}/.test(node.text)) return this.notLiteral('a brace expansion');
        return node.text.replace(/\\(\r?\n|.)/gsu, (_, c: string) =>
          c.startsWith('\n') || c.startsWith('\r') ? '' : c,
        );
      }
      case 'raw_string':
        return node.text.slice(1, -1);
      case 'string':
        return this.doubleQuoted(node);
      case 'concatenation': {
        const bare = kids(node)
          .map((c) => (c.type === 'word' ? c.text : '_'))
          .join('');
        if (/\{[^}]*(,|\.\.)[^}]*\}/.test(bare)) return this.notLiteral('a brace expansion');
        let v = '';
        for (const c of kids(node)) {
          const p = this.word(c);
          if (p === null) return null;
          v += p;
        }
        return v;
      }
      default:
        this.search(node);
        return this.notLiteral(describe(node));
    }
  }

  private doubleQuoted(node: ShellNode): string | null {
    let v = '';
    for (const c of kids(node)) {
      if (c.type === '"') continue;
      if (c.type !== 'string_content') {
        this.search(c);
        return this.notLiteral(describe(c));
      }
      v += c.text.replace(/\\([$`"\\\n])/g, (_, ch: string) => (ch === '\n' ? '' : ch));
    }
    return v;
  }

  private notLiteral(why: string): null {
    this.unproven(why);
    return null;
  }
}

function kids(node: ShellNode): ShellNode[] {
  return node.children.filter((c): c is ShellNode => c !== null);
}

/** Names of the constructs that are never proven, as the approver reads them. */
const WHAT: Record<string, string> = {
  command_substitution: 'a command substitution',
  process_substitution: 'a process substitution',
  simple_expansion: 'a variable expansion',
  expansion: 'a parameter expansion',
  arithmetic_expansion: 'an arithmetic expansion',
  ansi_c_string: "a $'…' string",
  translated_string: 'a $"…" string',
  heredoc_redirect: 'a heredoc',
  herestring_redirect: 'a here-string',
  variable_assignment: 'an assignment without a command',
  declaration_command: 'a declaration (export, declare, local…)',
  unset_command: 'unset',
  function_definition: 'a function definition',
  ERROR: 'a syntax error',
};

function describe(node: ShellNode): string {
  return WHAT[node.type] ?? `shell syntax (${node.type.replace(/_/g, ' ')})`;
}

/** The first control character other than tab and newline (bash reads a `\r` as part of a word), or null. */
function controlChar(source: string): number | null {
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a) || c === 0x7f) return c;
  }
  return null;
}

/**
 * The parser as the tool question broker holds it, loaded on first need or when `warm()` is called (gated
 * calls it a moment after it serves: loading tree-sitter's WebAssembly would take about 40 ms of the
 * start). An ask that comes first waits for it. A parser that fails to load reads every command as a syntax error, so
 * every shell call is asked of a person rather than decided by the rules, and `failed` says why.
 */
export class LazyShellParser {
  private parser: ShellParser | undefined;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly load: () => Promise<ShellParser>,
    private readonly failed: (err: unknown) => void,
  ) {}

  /** The parser once loaded; undefined while it loads (and the load begun). */
  get(): ShellParser | undefined {
    if (!this.parser) void this.warm();
    return this.parser;
  }

  /** Begins loading; resolves once the parser is loaded or has failed to. */
  warm(): Promise<void> {
    return (this.loading ??= this.load().then(
      (p) => void (this.parser = p),
      (err: unknown) => {
        this.failed(err);
        this.parser = unparsed;
      },
    ));
  }
}

/** The parser of LazyShellParser whose load failed: every command a syntax error. */
const unparsed: ShellParser = (_source, read) =>
  read({ type: 'ERROR', text: '', isNamed: true, isMissing: false, hasError: true, children: [] });
