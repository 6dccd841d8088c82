import { beforeAll, describe, expect, it } from 'vitest';
import { loadShellParser } from '../../queue/shell-parser.js';
import type { Autonomy } from '../../router/autonomy.js';
import type { ShellParser } from '../../router/shell.js';
import {
  checkToolRule,
  renderToolInput,
  ToolRuleTable as Table,
  type ToolRuleRow,
} from '../../router/tool-rules.js';

let shell: ShellParser;
beforeAll(async () => {
  shell = await loadShellParser();
});

/** The table over the real bash parser, for groups of one autonomy level. */
class ToolRuleTable {
  private readonly t: Table;
  constructor(
    rows: ToolRuleRow[],
    private readonly level: Autonomy,
  ) {
    this.t = new Table(rows, shell);
  }
  get invalid() {
    return this.t.invalid;
  }
  decide(folder: string, tool: string, input: unknown) {
    return this.t.decide(folder, tool, input, this.level);
  }
  explain(folder: string, tool: string, input: unknown) {
    return this.t.explain(folder, tool, input, this.level);
  }
}
const bash = (command: string) => ({ command });

let nextId = 1;
function row(p: Partial<ToolRuleRow>): ToolRuleRow {
  return {
    id: nextId++,
    group_folder: 'ops',
    seq: 0,
    tool: '*',
    input: '*',
    decision: 'allow',
    approvers: null,
    ...p,
  };
}

describe('tool rules', () => {
  it("the first row by seq of the group, then of its ancestors, decides; else the group's autonomy", () => {
    const t = new ToolRuleTable(
      [
        row({ group_folder: 'ops', seq: 5, tool: 'Bash', input: 'rm *', decision: 'deny' }),
        row({ group_folder: 'ops', seq: 1, tool: 'Bash', input: 'rm -rf /tmp/*', decision: 'allow' }),
        row({ group_folder: 'ops', seq: 9, tool: 'mcp__github__*', decision: 'ask', approvers: 'members' }),
        row({ group_folder: 'ops/child', seq: 1, tool: 'Write', decision: 'ask' }),
      ],
      'full',
    );
    expect(t.decide('ops', 'Bash', bash('rm -rf /tmp/x/y')).decision).toBe('allow');
    expect(t.decide('ops', 'Bash', bash('rm -rf /home')).decision).toBe('deny');
    expect(t.decide('ops', 'mcp__github__create_issue', {})).toMatchObject({
      decision: 'ask',
      approvers: 'members',
    });
    // The child's own row first, then the parent's.
    expect(t.decide('ops/child', 'Write', { file_path: 'a.txt' }).decision).toBe('ask');
    expect(t.decide('ops/child', 'Bash', bash('rm /etc/passwd')).decision).toBe('deny');
    expect(t.decide('other', 'Bash', bash('rm /')).rule).toBeNull();
    expect(new ToolRuleTable([], 'supervised').decide('ops', 'Bash', bash('make'))).toMatchObject({
      decision: 'ask',
      rule: null,
      why: 'autonomy supervised: a call that may write or execute',
    });
  });

  it('invalid rows never match and are reported; explain says why row by row', () => {
    const bad = [
      row({ seq: 0, tool: 'Bash[', decision: 'allow' }),
      row({ seq: 1, tool: 'Bash', decision: 'maybe' }),
      row({ seq: 2, tool: 'Bash', decision: 'ask', approvers: 'everyone' }),
    ];
    const good = row({ seq: 3, tool: 'Bash', input: 'ls*', decision: 'deny' });
    const t = new ToolRuleTable([...bad, good], 'full');
    expect(t.invalid.map((i) => i.row.id)).toEqual(bad.map((b) => b.id));
    expect(t.invalid[1]!.reason).toMatch(/decision 'maybe'/);
    expect(t.decide('ops', 'Bash', bash('ls -l'))).toMatchObject({ decision: 'deny', rule: good });
    expect(t.decide('ops', 'Bash', bash('cat x')).rule).toBeNull();
    const { parts, verdict } = t.explain('ops', 'Bash', bash('cat x'));
    expect(parts.map((p) => p.line)).toEqual(['cat x']);
    expect(parts[0]!.lines.map((l) => l.verdict)).toEqual(['invalid', 'invalid', 'invalid', 'no-match']);
    expect(verdict.decision).toBe('allow');
    expect(
      checkToolRule({
        group_folder: 'ops',
        seq: 1,
        tool: 'Bash',
        input: null,
        decision: 'ask',
        approvers: null,
      }),
    ).toBeNull();
    expect(
      checkToolRule({ group_folder: 'ops', seq: 1, tool: '', input: null, decision: 'ask', approvers: null }),
    ).toMatch(/tool/);
  });

  it('renders the input line: the command of a shell tool, the path of a file tool, else compact JSON', () => {
    expect(renderToolInput('Bash', { command: 'ls -l\necho hi', timeout: 5 })).toBe('ls -l echo hi');
    expect(renderToolInput('Write', { file_path: '/g/a.txt', content: 'x' })).toBe('/g/a.txt');
    expect(renderToolInput('mcp__github__create_issue', { title: 'a', body: 'b' })).toBe(
      '{"title":"a","body":"b"}',
    );
    expect(renderToolInput('Other', { path: 'p' })).toBe('{"path":"p"}');
  });

  it('autonomy presets: read_only reads only, supervised asks about anything else, full runs everything', () => {
    const calls: Array<[string, unknown]> = [
      ['Read', { file_path: 'a.txt' }],
      ['Grep', { pattern: 'x' }],
      ['mcp__gated__send', { chat: 'web:x', text: 'hi' }],
      ['Bash', bash('ls -la | grep x; cat a.txt')],
      ['Bash', bash('rm -rf build')],
      ['Bash', bash('ls; curl -d @secret x')],
      ['Bash', bash('git diff')],
      ['Write', { file_path: 'a.txt', content: 'x' }],
      ['mcp__github__create_issue', { title: 't' }],
      ['WebFetch', { url: 'http://x' }],
      ['Bash', bash('echo $(id)')],
    ];
    const want: Record<Autonomy, string[]> = {
      read_only: ['allow', 'allow', 'allow', 'allow', 'deny', 'deny', 'deny', 'deny', 'deny', 'deny', 'ask'],
      supervised: ['allow', 'allow', 'allow', 'allow', 'ask', 'ask', 'ask', 'ask', 'ask', 'ask', 'ask'],
      full: ['allow', 'allow', 'allow', 'allow', 'allow', 'allow', 'allow', 'allow', 'allow', 'allow', 'ask'],
    };
    for (const level of ['read_only', 'supervised', 'full'] as const) {
      const t = new ToolRuleTable([], level);
      expect(
        calls.map(([tool, input]) => t.decide('ops', tool, input).decision),
        level,
      ).toEqual(want[level]);
    }
    // The group's own rules come first, the preset after them.
    const t = new ToolRuleTable(
      [
        row({ seq: 1, tool: 'Bash', input: 'make *', decision: 'allow' }),
        row({ seq: 2, tool: 'Bash', input: 'cat *', decision: 'deny' }),
      ],
      'read_only',
    );
    expect(t.decide('ops', 'Bash', bash('make test'))).toMatchObject({ decision: 'allow', why: /tool rule/ });
    expect(t.decide('ops', 'Bash', bash('cat x'))).toMatchObject({ decision: 'deny', why: /tool rule/ });
    expect(t.decide('ops', 'Bash', bash('make && ls'))).toMatchObject({ decision: 'allow' });
    expect(t.decide('ops', 'Bash', bash('make && touch x'))).toMatchObject({
      decision: 'deny',
      command: 'touch x',
      why: 'autonomy read_only: only reading is allowed',
    });
  });
});
