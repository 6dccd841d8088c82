/**
 * A run's agent setup (queue/agent-setup.ts) on a real database and configuration folder: agent and model
 * from the group, its profile row or the defaults; an unknown agent refused by name; secrets by group and
 * ancestors; configuration paths as a container or the host sees them; `${CONFIG_DIR}` filled in.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { agentSetupOf, UnknownAgentError } from '../../queue/agent-setup.js';
import { AgentStore } from '../../store/agents.js';
import { addGroup } from '../../store/groups.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { writeGroupConfig } from '../helpers/group-config.js';

function setup() {
  const { db } = freshDb();
  const root = tempDir('gated-setup-');
  const config = loadConfig({
    GATED_CONFIG_DIR: join(root, 'config'),
    GATED_CLAUDE_MODEL: 'claude-default',
    GATED_AGENT_SECRETS: 'SHARED,ops:TOKEN=OPS_TOKEN,ops/db:TOKEN=DB_TOKEN,sales:OTHER',
    SHARED: 's',
    OPS_TOKEN: 't-ops',
    DB_TOKEN: 't-db',
    OTHER: 'o',
  });
  for (const g of ['ops', 'ops/db', 'ops/web', 'sales']) addGroup(db, join(root, 'groups'), g);
  writeGroupConfig(config.configDir, 'ops');
  return { db, config, agents: new AgentStore(db) };
}

describe('agent setup', () => {
  it('picks agent, model, command and image from the group, its profile or the defaults', () => {
    const { db, config, agents } = setup();
    const onHost = agentSetupOf(db, config, false);
    expect(onHost('ops')).toMatchObject({
      agent: 'claude',
      model: 'claude-default',
      command: null,
      image: null,
    });
    agents.setChoice('ops/db', { agent: 'codex', model: null });
    expect(onHost('ops/db')).toMatchObject({ agent: 'codex', model: null, command: config.codexCmd });
    agents.saveProfile({ name: 'plain', image: 'plain:1', command: 'node plain.mjs', model: 'p-model' });
    agents.setChoice('ops/web', { agent: 'plain', model: null });
    expect(onHost('ops/web')).toMatchObject({
      agent: 'plain',
      model: 'p-model',
      command: 'node plain.mjs',
      image: 'plain:1',
    });
    agents.setChoice('ops/web', { agent: 'plain', model: 'own-model' });
    expect(onHost('ops/web').model).toBe('own-model');
    agents.setChoice('sales', { agent: 'ghost', model: null });
    expect(() => onHost('sales')).toThrow(UnknownAgentError);
    expect(() => onHost('sales')).toThrow(/names agent 'ghost', which has no agent_profiles row/);
  });

  it('gives each group its own secrets and its ancestors', () => {
    const { db, config } = setup();
    const s = agentSetupOf(db, config, false);
    expect(s('ops').secrets).toEqual({ SHARED: 's', TOKEN: 't-ops' });
    expect(s('ops/db').secrets).toEqual({ SHARED: 's', TOKEN: 't-db' });
    expect(s('ops/web').secrets).toEqual({ SHARED: 's', TOKEN: 't-ops' });
    expect(s('sales').secrets).toEqual({ SHARED: 's', OTHER: 'o' });
  });

  it('names configuration paths as the agent sees them, mounted read-only in containers', () => {
    const { db, config } = setup();
    const host = agentSetupOf(db, config, false)('ops/db');
    expect(host.config.readOnly).toEqual([join(config.configDir, 'ops')]);
    expect(host.config.skills?.[0]?.path).toBe(join(config.configDir, 'ops', 'skills', 'haiku', 'SKILL.md'));
    expect(host.mounts).toEqual([]);
    const boxed = agentSetupOf(db, config, true)('ops/db');
    expect(boxed.config.readOnly).toEqual(['/gated/config/ops']);
    expect(boxed.config.skills?.[0]?.path).toBe('/gated/config/ops/skills/haiku/SKILL.md');
    expect(boxed.mounts).toEqual([{ source: join(config.configDir, 'ops'), target: '/gated/config/ops' }]);
    expect(boxed.config.mcpServers?.demo).toMatchObject({ env: { DEMO_TOKEN: '${DEMO_TOKEN}' } });
    expect(boxed.problems.map((p) => p.file)).toEqual(['ops/skills/empty/SKILL.md', 'ops/mcp.json']);
  });
});
