import { beforeAll, describe, expect, it } from 'vitest';
import { loadShellParser } from '../../gated/shell-parser.js';
import type { ShellParser } from '../../router/shell.js';
import {
  checkToolRule,
  renderToolInput,
  ToolRuleTable as Table,
  type ToolDecision,
  type ToolRuleRow,
} from '../../router/tool-rules.js';

let shell: ShellParser;
beforeAll(async () => {
  shell = await loadShellParser();
});

/** The table over the real bash parser. */
class ToolRuleTable extends Table {
  constructor(rows: ToolRuleRow[], fallback: ToolDecision) {
    super(rows, fallback, shell);
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
  it('the first row by seq of the group, then of its ancestors, decides; else the default', () => {
    const t = new ToolRuleTable(
      [
        row({ group_folder: 'ops', seq: 5, tool: 'Bash', input: 'rm *', decision: 'deny' }),
        row({ group_folder: 'ops', seq: 1, tool: 'Bash', input: 'rm -rf /tmp/*', decision: 'allow' }),
        row({ group_folder: 'ops', seq: 9, tool: 'mcp__github__*', decision: 'ask', approvers: 'members' }),
        row({ group_folder: 'ops/child', seq: 1, tool: 'Write', decision: 'ask' }),
      ],
      'allow',
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
    expect(new ToolRuleTable([], 'ask').decide('ops', 'Bash', bash('ls')).decision).toBe('ask');
  });

  it('invalid rows never match and are reported; explain says why row by row', () => {
    const bad = [
      row({ seq: 0, tool: 'Bash[', decision: 'allow' }),
      row({ seq: 1, tool: 'Bash', decision: 'maybe' }),
      row({ seq: 2, tool: 'Bash', decision: 'ask', approvers: 'everyone' }),
    ];
    const good = row({ seq: 3, tool: 'Bash', input: 'ls*', decision: 'deny' });
    const t = new ToolRuleTable([...bad, good], 'allow');
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
});
