/**
 * Reading a group's configuration folder (core/group-config.ts): inheritance from the parent per part,
 * broken files reported and never fatal, links and FIFOs refused, chat commands found and expanded.
 */
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  commandNames,
  expandCommand,
  findCommand,
  readGroupConfig,
  slashWord,
} from '../../core/group-config.js';
import { tempDir } from '../helpers/db.js';
import { INSTRUCTION, writeGroupConfig } from '../helpers/group-config.js';

describe('group configuration', () => {
  it('reads instructions, skills, MCP servers and commands; reports what it cannot use', () => {
    const root = tempDir('gated-cfg-');
    writeGroupConfig(root, 'ops');
    const cfg = readGroupConfig(root, 'ops');
    expect(cfg.instructions).toBe(INSTRUCTION);
    expect(cfg.instructionFiles).toEqual(['ops/CLAUDE.md']);
    expect(cfg.skills).toEqual([
      {
        name: 'haiku',
        description: 'Write any answer as a haiku when asked for poetry',
        from: 'ops',
        file: 'ops/skills/haiku/SKILL.md',
      },
    ]);
    expect(Object.keys(cfg.mcpServers)).toEqual(['demo']);
    expect(cfg.mcpServers.demo).toMatchObject({
      type: 'stdio',
      command: 'node',
      env: { DEMO_TOKEN: '${DEMO_TOKEN}' },
    });
    expect(cfg.commands.map((c) => c.name)).toEqual(['summarize']);
    expect(cfg.problems).toEqual([
      { file: 'ops/skills/empty/SKILL.md', reason: 'is missing' },
      { file: 'ops/mcp.json', reason: 'server \'broken\' needs a "command"' },
    ]);
  });

  it('no configuration folder yet: nothing, and the folder made later is read at the next call', () => {
    const root = join(tempDir('gated-cfg-'), 'config');
    const none = readGroupConfig(root, 'ops');
    expect(none.instructions).toBe('');
    expect(none.sources).toEqual([]);
    expect(readGroupConfig(root, 'ops')).toEqual(none);
    writeGroupConfig(root, 'ops');
    expect(readGroupConfig(root, 'ops').instructions).toBe(INSTRUCTION);
  });

  it('a child uses each part of its parent that it has none of', () => {
    const root = tempDir('gated-cfg-');
    writeGroupConfig(root, 'ops');
    mkdirSync(join(root, 'ops', 'db', 'commands'), { recursive: true });
    writeFileSync(join(root, 'ops', 'db', 'commands', 'vacuum.md'), 'Vacuum $ARGUMENTS now');
    const child = readGroupConfig(root, 'ops/db');
    expect(child.instructions).toBe(INSTRUCTION);
    expect(child.skills.map((s) => s.from)).toEqual(['ops']);
    expect(child.mcpFile).toBe('ops/mcp.json');
    expect(child.commands.map((c) => `${c.from}:${c.name}`)).toEqual(['ops/db:vacuum']);
    expect(child.sources.sort()).toEqual(['ops', 'ops/db']);
    expect(commandNames(root, 'ops/db')).toEqual(['vacuum']);
    expect(commandNames(root, 'ops/web')).toEqual(['summarize']);
    // A group with no folder at all: nothing, and nothing to report.
    expect(readGroupConfig(root, 'sales')).toMatchObject({
      instructions: '',
      skills: [],
      commands: [],
      problems: [],
    });
  });

  it('malformed mcp.json, links and FIFOs are reported, the rest still read', () => {
    const root = tempDir('gated-cfg-');
    const dir = join(root, 'g');
    mkdirSync(join(dir, 'commands'), { recursive: true });
    writeFileSync(join(dir, 'mcp.json'), '{"mcpServers": {');
    writeFileSync(join(root, 'secret.txt'), 'outside');
    symlinkSync(join(root, 'secret.txt'), join(dir, 'CLAUDE.md'));
    writeFileSync(join(dir, 'AGENTS.md'), 'plain instructions');
    execFileSync('mkfifo', [join(dir, 'commands', 'pipe.md')]);
    writeFileSync(join(dir, 'commands', 'ok.md'), 'fine $ARGUMENTS');
    const cfg = readGroupConfig(root, 'g');
    expect(cfg.instructions).toBe('plain instructions');
    expect(cfg.commands.map((c) => c.name)).toEqual(['ok']);
    expect(cfg.mcpServers).toEqual({});
    const byFile = Object.fromEntries(cfg.problems.map((p) => [p.file, p.reason]));
    expect(byFile['g/CLAUDE.md']).toBe('g/CLAUDE.md is a symbolic link');
    expect(byFile['g/mcp.json']).toMatch(/^not valid JSON/);
    expect(byFile['g/commands/pipe.md']).toMatch(/not a command file|not a regular file/);
    const problems: unknown[] = [];
    expect(findCommand(root, 'g', 'pipe', (p) => problems.push(p))).toBeUndefined();
    expect(problems).toHaveLength(1);
  });

  it('reads through the safe-file module: a hard link to a file outside and a linked folder are refused', () => {
    const root = tempDir('gated-cfg-');
    const dir = join(root, 'g');
    mkdirSync(dir, { recursive: true });
    const outside = tempDir('gated-outside-');
    writeFileSync(join(outside, 'secret.md'), 'the secret');
    // A second name for a file outside the folder: lstat sees a regular file, the safe-file module does not
    // take a file with more than one name.
    linkSync(join(outside, 'secret.md'), join(dir, 'CLAUDE.md'));
    mkdirSync(join(outside, 'commands'));
    writeFileSync(join(outside, 'commands', 'steal.md'), 'stolen $ARGUMENTS');
    symlinkSync(join(outside, 'commands'), join(dir, 'commands'));
    const cfg = readGroupConfig(root, 'g');
    expect(cfg.instructions).toBe('');
    expect(cfg.commands).toEqual([]);
    const byFile = Object.fromEntries(cfg.problems.map((p) => [p.file, p.reason]));
    expect(byFile['g/CLAUDE.md']).toBe('g/CLAUDE.md is a hard link (a file with more than one name)');
    expect(byFile['g/commands']).toBe('g/commands is a symbolic link');
    expect(commandNames(root, 'g')).toEqual([]);
  });

  it('expands a command: $ARGUMENTS is the rest of the message', () => {
    const w = slashWord('/Summarize@bot  the whole\nthread ');
    expect(w).toEqual({ name: 'summarize', rest: 'the whole\nthread ' });
    const cmd = { name: 'summarize', text: 'Sum up: $ARGUMENTS. Again: $ARGUMENTS', from: 'g', file: 'g/x' };
    expect(expandCommand(cmd, w!.rest)).toBe('Sum up: the whole\nthread. Again: the whole\nthread');
    expect(slashWord('not /a command')).toBeUndefined();
  });
});
