/**
 * The canonical form of a simple shell command, what a shell tool rule's `input` glob is matched against
 * (docs/APPROVALS.md, "What a shell rule matches"). Pure text functions: router/shell.ts gives them the
 * words the parser proved literal.
 *
 * - The program named by a path in a system bin folder is its name: `/bin/rm` and `/usr/bin/rm` are `rm`.
 *   A program named by any other path (`./rm`, `/tmp/x/rm`) keeps its path, so `allow 'make *'` does not
 *   cover a `./make` the agent wrote; deny rules see its name too (`denyForms`).
 * - Words are joined by one space; a word holding anything but safe characters (whitespace, quotes, `$`,
 *   `;`, non-ASCII…) is written in single quotes, so `echo 'a b'` is not `echo a b`.
 * - Short flags are one cluster, sorted and without repeats, where the first one stood: `rm -rf`, `rm -fr`,
 *   `rm -r -f` and `rm -r x -f` are all `rm -fr …`. Only words of letters count (`-n5`, `-1`, `--force`
 *   are left alone), and nothing after `--`. A flag's value given as the next word is not recognised.
 */

/** Folders whose programs are the ones their bare name finds: a path there is the program's name. */
const SYSTEM_BIN = new Set(['/bin', '/sbin', '/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin']);

/** Characters a word may hold and still be written bare; glob characters stay bare so rules can use them. */
const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./~*?[\]^!#-]+$/;

const SHORT_FLAGS = /^-[A-Za-z]+$/;

/** A word as the canonical line writes it: bare when safe, else single-quoted. */
export function quoteWord(word: string): string {
  if (SAFE_WORD.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The program's name as rules see it: a path in a system bin folder becomes the bare name. */
export function programName(word: string): string {
  const slash = word.lastIndexOf('/');
  if (slash < 0) return word;
  const dir = word.slice(0, slash).replace(/\/+$/, '') || '/';
  const base = word.slice(slash + 1);
  return SYSTEM_BIN.has(dir.replace(/\/{2,}/g, '/')) && base !== '' ? base : word;
}

/** The bare name of any program path (`./rm` → `rm`): what deny rules also look at. */
export function programBase(word: string): string {
  const base = word.slice(word.lastIndexOf('/') + 1);
  return base === '' ? word : base;
}

/**
 * Merges the short-flag words after the program into one sorted cluster at the first one's place;
 * `isFlag` says which words may merge (a rule's glob words never do).
 */
export function mergeShortFlags(
  words: readonly string[],
  isFlag = (w: string) => SHORT_FLAGS.test(w),
): string[] {
  const out: string[] = [];
  const letters = new Set<string>();
  let at = -1;
  let ended = false;
  words.forEach((w, i) => {
    if (i === 0 || ended) {
      out.push(w);
      return;
    }
    if (w === '--') ended = true;
    if (!ended && isFlag(w)) {
      for (const c of w.slice(1)) letters.add(c);
      if (at < 0) {
        at = out.length;
        out.push('');
      }
      return;
    }
    out.push(w);
  });
  if (at >= 0) out[at] = '-' + [...letters].sort().join('');
  return out;
}

/** One proven simple command: its words with quotes removed, and what rules match. */
export interface SimpleCommand {
  /** The command's words as the program receives them (argv), program as written. */
  argv: readonly string[];
  /** `NAME=value` assignments written before the program. */
  assigns: readonly string[];
  /** The canonical line: assignments, program name, merged flags, words quoted where needed. */
  line: string;
  /**
   * Further forms deny rules are matched against, so a prefix does not hide a denied command: without the
   * assignments, and with the program's bare name when a path named it.
   */
  denyForms: readonly string[];
}

/** The canonical command for proven words (argv non-empty). */
export function simpleCommand(argv: readonly string[], assigns: readonly string[]): SimpleCommand {
  const canon = (program: string) =>
    mergeShortFlags([program, ...argv.slice(1)])
      .map(quoteWord)
      .join(' ');
  const bare = canon(programName(argv[0]!));
  const line = [...assigns.map(quoteAssign), bare].join(' ');
  const forms = new Set([bare, canon(programBase(argv[0]!))]);
  forms.delete(line);
  return { argv, assigns, line, denyForms: [...forms] };
}

function quoteAssign(a: string): string {
  const eq = a.indexOf('=');
  return a.slice(0, eq + 1) + quoteWord(a.slice(eq + 1));
}

/** Glob characters: a rule word holding one is a pattern, never merged or renamed. */
const GLOB_CHARS = /[*?[\\]/;

/**
 * A shell rule's `input` glob in the same canonical form as commands: whitespace runs become one space,
 * the first word's system path becomes the name, and literal short-flag words merge (`rm -r -f *` and
 * `rm -rf *` are both `rm -fr *`).
 */
export function canonicalPattern(glob: string): string {
  const words = glob.trim().split(/[ \t\n]+/);
  if (words.length === 0 || words[0] === '') return glob;
  if (!GLOB_CHARS.test(words[0]!)) words[0] = programName(words[0]!);
  return mergeShortFlags(words, (w) => !GLOB_CHARS.test(w) && SHORT_FLAGS.test(w)).join(' ');
}
