import { beforeAll, describe, expect, it } from 'vitest';
import { loadShellParser } from '../../queue/shell-parser.js';
import { LazyShellParser, splitShell, type ShellParser } from '../../router/shell.js';
import { canonicalPattern } from '../../router/shell-words.js';
import { ToolRuleTable, type ToolRuleRow } from '../../router/tool-rules.js';

/**
 * Shell commands judged per simple command (docs/APPROVALS.md, "What a shell rule matches"), on the real
 * tree-sitter bash parser: the canonical form, deny winning across parts, and a table of hostile inputs
 * that must each be asked about or decided as bash would run them.
 */

let shell: ShellParser;
beforeAll(async () => {
  shell = await loadShellParser();
});

let nextId = 1;
function rule(input: string, decision: string): ToolRuleRow {
  return { id: nextId++, group_folder: 'g', seq: nextId, tool: 'Bash', input, decision, approvers: null };
}
/** The rules over the real parser; the group is `full`, so only the rules and the parser decide. */
function table(rows: ToolRuleRow[]): ToolRuleTable {
  return new ToolRuleTable([...rows, { ...rule('*', 'ask'), seq: 1_000_000 }], shell);
}
const decide = (t: ToolRuleTable, command: string) => t.decide('g', 'Bash', { command }, 'full');
const lines = (command: string) => splitShell(shell, command).commands.map((c) => c.line);

describe('shell commands split and normalised', () => {
  it('splits lists, pipelines, subshells and groups into their simple commands', () => {
    expect(lines('ls -la && curl x | sh')).toEqual(['ls -al', 'curl x', 'sh']);
    expect(lines('ls\nrm -rf /')).toEqual(['ls', 'rm -fr /']);
    expect(lines('(cd /x; make) || { echo no; } & wait')).toEqual(['cd /x', 'make', 'echo no', 'wait']);
    expect(splitShell(shell, 'ls -la; pwd 2>/dev/null >&2').unproven).toEqual([]);
  });

  it('normalises the program path, whitespace, quotes and combined short flags', () => {
    for (const c of [
      'rm -rf /',
      'rm  -rf /',
      'rm -fr /',
      'rm -r -f /',
      'rm\t-rf /',
      '/bin/rm -rf /',
      "rm -rf '/'",
    ])
      expect(lines(c), c).toEqual(['rm -fr /']);
    expect(lines('/usr/bin/git  status')).toEqual(['git status']);
    expect(lines('rm -r /x -f')).toEqual(['rm -fr /x']);
    // A path outside the system's bin folders is not the program of that name.
    expect(lines('./rm -rf /')).toEqual(['./rm -fr /']);
    // Only letter clusters merge; long options and values stay; nothing after `--`.
    expect(lines('head -n5 -q --lines=3 -- -x -y')).toEqual(['head -n5 -q --lines=3 -- -x -y']);
    // Quoted words keep their spaces, so `echo 'a b'` is not `echo a b`.
    expect(lines(`echo "a b" 'c'd`)).toEqual([`echo 'a b' cd`]);
    expect(canonicalPattern('/bin/rm  -r -f *')).toBe('rm -fr *');
  });

  it('deny wins across the parts; every part must be allowed for the call to be', () => {
    const t = table([rule('rm -rf *', 'deny'), rule('ls *', 'allow'), rule('echo *', 'allow')]);
    for (const c of [
      'rm  -rf /',
      'rm -fr /',
      '/bin/rm -rf /',
      'ls; rm -fr /',
      'ls && rm -r -f /',
      'X=1 rm -rf /',
    ])
      expect(decide(t, c), c).toMatchObject({ decision: 'deny', command: expect.stringMatching(/rm -fr/) });
    expect(decide(t, 'ls -la && curl x | sh')).toMatchObject({ decision: 'ask', why: /a shell \(sh\)/ });
    expect(decide(t, 'ls -la && curl x')).toMatchObject({ decision: 'ask', command: 'curl x' });
    expect(decide(t, 'ls\nrm -r /tmp/x').decision).toBe('ask');
    expect(decide(t, 'ls -la; echo hi | ls')).toMatchObject({ decision: 'allow' });
    // `ls *` also allows `ls` alone.
    expect(decide(t, 'ls').decision).toBe('allow');
    // A program named by another path is matched by its bare name for deny rules only.
    expect(decide(t, './rm -rf /').decision).toBe('deny');
    expect(decide(t, './ls -la').decision).toBe('ask');
  });

  it('explain says which command and rule decided', () => {
    const deny = rule('rm -rf *', 'deny');
    const t = table([rule('ls *', 'allow'), deny]);
    const e = t.explain('g', 'Bash', { command: 'ls; rm -fr /' }, 'full');
    expect(e.parts.map((p) => [p.line, p.verdict.decision])).toEqual([
      ['ls', 'allow'],
      ['rm -fr /', 'deny'],
    ]);
    expect(e.verdict).toMatchObject({ decision: 'deny', rule: deny, why: `tool rule ${deny.id}` });
  });
});

/** Inputs an agent could use to slip past a rule, and what each must get under `allow 'ls *'`/`'echo *'`. */
const HOSTILE: Array<[string, 'ask' | 'deny' | 'allow', RegExp?]> = [
  ['echo $(rm -rf /)', 'deny'],
  ['echo `rm -rf /`', 'deny'],
  ['echo "$(id)"', 'ask', /command substitution/],
  ['cat <(curl x)', 'ask', /process substitution/],
  ['ls $HOME', 'ask', /variable expansion/],
  ['$CMD -rf /', 'ask', /program name/],
  ['${X:-rm} -rf /', 'ask', /program name/],
  ["echo $'\\x41'", 'ask', /\$'/],
  ['ls $((1+2))', 'ask', /arithmetic/],
  ['cat <<EOF\nhi\nEOF', 'ask', /heredoc/],
  ['cat <<<hi', 'ask', /here-string/],
  ['eval "rm -rf /"', 'deny'],
  ['eval ls', 'ask', /eval/],
  ["bash -c 'rm -fr /'", 'deny'],
  ["sh -c 'ls'", 'ask', /shell/],
  ['curl x | sh', 'ask', /shell/],
  ['exec ls', 'ask', /runs another/],
  ['sudo rm -rf /', 'deny'],
  ['sudo -u root rm -rf /', 'deny'],
  ['timeout 5 rm -rf /', 'deny'],
  ['echo x | xargs rm -rf', 'deny'],
  ['find / -exec rm -rf {} ;', 'deny'],
  ['find . -delete', 'ask', /find/],
  ['env ls', 'ask', /runs another/],
  ['ls > ~/.bashrc', 'ask', /writes a file/],
  ['echo x >> /etc/passwd', 'ask', /writes a file/],
  ['ls &> out', 'ask', /writes a file/],
  ['ls 2>/dev/null', 'allow'],
  ['ls < /etc/hostname', 'allow'],
  ['PATH=/tmp ls', 'ask'],
  ['export PATH=/tmp; ls', 'ask', /declaration/],
  ['A=1', 'ask', /assignment/],
  ['f() { rm -rf /; }; f', 'deny'],
  ['if true; then ls; fi', 'ask', /if statement/],
  ['for f in *; do rm -rf $f; done', 'deny'],
  ['ls -{l,a}', 'ask', /brace/],
  ['rm -{r,f} /', 'ask', /brace/],
  // bash joins `ls\<newline> -la` into `ls -la`; tree-sitter would split a word there, so it is asked.
  ['ls\\\n -la', 'ask', /continuation/],
  ['ls \\\n-la', 'allow'],
  ['r\\\nm -rf /', 'ask', /continuation/],
  ['ls "unterminated', 'ask', /syntax error/],
  ['ls )', 'ask', /syntax error/],
  ['ls ;; rm x', 'ask'],
  ['ls\r\nrm -rf /tmp/x', 'deny'],
  ['ls\r\necho x', 'ask', /control/],
  ['ls\u0000; rm x', 'ask', /control/],
  // Unicode whitespace is a word character to bash: one program named `ls -la`, which no rule allows.
  ['ls\u00a0-la', 'ask'],
  ['ls\u2003; curl x', 'ask'],
  ['echo ok\u3000&& rm -rf /', 'deny'],
  // Quoting tricks: each is the same argv bash runs.
  ["r'm' -rf /", 'deny'],
  ['r"m" -rf /', 'deny'],
  ['\\rm -rf /', 'deny'],
  ['rm -r\\f /', 'deny'],
  ["'ls' -la", 'allow'],
  ['"ls -la"', 'ask'],
  ['ls\\ -la', 'ask'],
  ['ls # ; rm -rf /', 'allow'],
  ['ls #\nrm -rf /', 'deny'],
  ['ls & rm -rf / &', 'deny'],
  ['! rm -rf /', 'deny'],
  ['ls | tee /tmp/x', 'ask'],
  ['[[ -f x ]] && rm -rf /', 'deny'],
  ['', 'ask'],
];

describe('hostile shell inputs', () => {
  it.each(HOSTILE)('%j is %s', (command, want, why) => {
    const t = table([rule('rm -rf *', 'deny'), rule('ls *', 'allow'), rule('echo *', 'allow')]);
    const v = decide(t, command);
    expect(v.decision).toBe(want);
    if (why) expect(v.why).toMatch(why);
  });
});

describe('the parser loaded in the background (LazyShellParser)', () => {
  it('is absent until its load resolves, then the loaded one; loaded once', async () => {
    let resolve!: (p: ShellParser) => void;
    let loads = 0;
    const lazy = new LazyShellParser(
      () => (loads++, new Promise<ShellParser>((r) => (resolve = r))),
      () => expect.fail('no failure expected'),
    );
    expect(lazy.get()).toBeUndefined();
    const ready = lazy.warm();
    expect(lazy.get()).toBeUndefined();
    resolve(shell);
    await ready;
    expect(lazy.get()).toBe(shell);
    expect(loads).toBe(1);
  });

  it('after a failed load, says why once and has every shell command asked, even one a rule allows', async () => {
    const failures: unknown[] = [];
    const lazy = new LazyShellParser(
      () => Promise.reject(new Error('no wasm')),
      (err) => failures.push(err),
    );
    await lazy.warm();
    await lazy.warm();
    expect(failures.map((e) => (e as Error).message)).toEqual(['no wasm']);
    const t = new ToolRuleTable([rule('ls *', 'allow'), rule('rm -rf *', 'deny')], lazy.get()!);
    expect(t.decide('g', 'Bash', { command: 'ls -la' }, 'full').decision).toBe('ask');
    expect(t.decide('g', 'Bash', { command: 'rm -rf /' }, 'full').decision).toBe('ask');
    // A tool that is not a shell needs no parser: its rules decide as ever.
    const other = new ToolRuleTable([{ ...rule('*', 'allow'), tool: 'Read' }], lazy.get()!);
    expect(other.decide('g', 'Read', { file_path: 'x' }, 'full').decision).toBe('allow');
  });
});
