import type { Db } from './db.js';

/**
 * Which agent a group runs and with what model (registered_groups.agent, .model), and the agent profiles an
 * operator defines as rows (agent_profiles: name → image or command), docs/AGENTS.md.
 */

/** An agent profile row: how to run one kind of agent. */
export interface AgentProfile {
  name: string;
  /** Container image (docker, swarm); null: the runtime's default for that agent. */
  image: string | null;
  /** Shell command (process runtime); null: the default for that agent. */
  command: string | null;
  /** Model of groups that name none; null: the agent's default. */
  model: string | null;
}

/** A group's choice of agent and model, as stored (nulls: the defaults). */
export interface AgentChoice {
  agent: string | null;
  model: string | null;
}

/** The agent names that need no row: the two agents this repository ships. */
export const BUILT_IN_AGENTS = ['claude', 'codex'] as const;

/** Reads agent choices and profiles with statements prepared once. */
export class AgentStore {
  private readonly s;

  constructor(db: Db) {
    this.s = {
      choice: db.prepare(`SELECT agent, model FROM registered_groups WHERE folder = ?`),
      profile: db.prepare(`SELECT name, image, command, model FROM agent_profiles WHERE name = ?`),
      profiles: db.prepare(`SELECT name, image, command, model FROM agent_profiles ORDER BY name`),
      upsert: db.prepare(
        `INSERT INTO agent_profiles (name, image, command, model) VALUES (@name, @image, @command, @model)
         ON CONFLICT (name) DO UPDATE SET image = excluded.image, command = excluded.command, model = excluded.model`,
      ),
      setChoice: db.prepare(
        `UPDATE registered_groups SET agent = @agent, model = @model WHERE folder = @folder`,
      ),
    };
  }

  /** The group's agent and model columns (both null for an unregistered folder). */
  choice(folder: string): AgentChoice {
    return (this.s.choice.get(folder) as AgentChoice | undefined) ?? { agent: null, model: null };
  }

  /** The profile row named `name`, if an operator defined one. */
  profile(name: string): AgentProfile | undefined {
    return this.s.profile.get(name) as AgentProfile | undefined;
  }

  /** Every profile row, by name. */
  profiles(): AgentProfile[] {
    return this.s.profiles.all() as AgentProfile[];
  }

  /** Defines (or redefines) a profile. */
  saveProfile(p: AgentProfile): void {
    this.s.upsert.run(p);
  }

  /** Sets a group's agent and model (null: the defaults). False when the group is not registered. */
  setChoice(folder: string, choice: AgentChoice): boolean {
    return this.s.setChoice.run({ folder, ...choice }).changes > 0;
  }
}
