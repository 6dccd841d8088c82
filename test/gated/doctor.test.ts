import { copyFileSync, mkdirSync, writeFileSync, type statfsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { packageFile } from '../../core/paths.js';
import { bundledAgentsFinding } from '../../gated/doctor-agents.js';
import { diskFinding } from '../../gated/doctor.js';
import { main } from '../../gated/program.js';
import { openDatabase, SCHEMA_VERSION } from '../../store/db.js';
import { tempDir } from '../helpers/db.js';
import { DiscordApiServer } from '../infra/discord-api.js';
import { GithubApiServer } from '../infra/github-api.js';
import { freePort } from '../infra/atproto/proc.js';
import { emailEnv, startMailWorld } from '../infra/mail.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { TelegramApiServer } from '../infra/telegram-api.js';

const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  process.exitCode = undefined;
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Runs `gated doctor` in this process with `env` set; returns its exit code and output. */
async function doctor(db: string, env: Record<string, string>) {
  for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
  let out = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((out += String(s)), true));
  process.exitCode = undefined;
  try {
    await main(['node', 'gated', 'doctor', '--db', db]);
  } finally {
    vi.restoreAllMocks();
  }
  const code = Number(process.exitCode ?? 0);
  process.exitCode = undefined;
  return { code, lines: out.trim().split('\n') };
}

/** A Telegram Bot API, a Discord API and a Slack Web API on loopback, each knowing its own token. */
async function platforms() {
  const telegram = await TelegramApiServer.start('4242:right-token', { username: 'gated_bot' });
  const discord = await DiscordApiServer.start('right-discord-token');
  const slack = await SlackApiServer.start();
  servers.push(telegram, discord, slack);
  return { telegram, discord, slack };
}

describe('gated doctor', { timeout: 60_000 }, () => {
  it('checks a GitHub App by minting one installation token; a wrong installation is named', async () => {
    const github = await GithubApiServer.start();
    servers.push(github);
    const app = github.installApp();
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    openDatabase(db).close();
    const key = join(dir, 'app.pem');
    writeFileSync(key, app.privateKeyPem, { mode: 0o600 });
    const env = (installation: string) => ({
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_RUNTIME: 'process',
      GITHUB_APP_ID: app.appId,
      GITHUB_APP_INSTALLATION_ID: installation,
      GITHUB_APP_PRIVATE_KEY_FILE: key,
      GITHUB_WEBHOOK_SECRET: 'a-webhook-secret',
      GITHUB_API_URL: github.url,
    });
    const ok = await doctor(db, env(app.installationId));
    expect(ok.code, ok.lines.join('\n')).toBe(0);
    expect(ok.lines).toContain(
      `OK    github         signed in as gated-app[bot] (/app, an installation token for ${app.installationId})`,
    );
    expect(app.issued).toHaveLength(1);
    const lost = await doctor(db, env('999'));
    expect(lost.code).toBe(1);
    expect(lost.lines.join('\n')).toMatch(
      /^FAIL {2}github .*the credentials were refused \(404\)\n\s+fix: check GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID and the key file$/m,
    );
    expect(lost.lines.join('\n')).not.toContain('PRIVATE KEY');
  });

  it('a healthy setup: every check ok, the bots named by their platforms, exit 0', async () => {
    const { telegram, discord, slack } = await platforms();
    const dir = tempDir();
    const db = join(dir, 'data', 'gated.db');
    openDatabase(db).close();
    const r = await doctor(db, {
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_RUNTIME: 'process',
      TELEGRAM_BOT_TOKEN: telegram.token,
      TELEGRAM_API_ROOT: telegram.url,
      DISCORD_BOT_TOKEN: discord.token,
      DISCORD_API_ROOT: discord.apiRoot,
      SLACK_BOT_TOKEN: slack.botToken,
      SLACK_SIGNING_SECRET: 'a-signing-secret',
      SLACK_API_URL: slack.apiUrl,
    });
    expect(r.code, r.lines.join('\n')).toBe(0);
    expect(r.lines).toEqual([
      expect.stringMatching(/^OK {4}data folder {3}.*data is writable$/),
      expect.stringMatching(/^OK {4}groups folder .*groups does not exist yet; gated creates it at start$/),
      expect.stringMatching(
        new RegExp(`^OK {4}database {6}.*gated\\.db: quick_check ok, schema version ${SCHEMA_VERSION}$`),
      ),
      expect.stringMatching(/^OK {4}disk +[\d.]+ GiB free on the disk of /),
      'OK    names          every route, agent, task and limit points somewhere',
      'OK    telegram       signed in as @gated_bot (getMe)',
      'OK    discord        signed in as gated (/users/@me)',
      'OK    slack          signed in as gated in team T0TEST (auth.test)',
      'all good',
    ]);
  });

  it('email: an IMAP login opening the mailbox and an SMTP login; a refused password and a closed port named', async () => {
    const world = await startMailWorld([]);
    servers.push({ close: () => world.stop() });
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    openDatabase(db).close();
    const base = { GATED_GROUPS_DIR: join(dir, 'groups'), GATED_RUNTIME: 'process', ...emailEnv(world) };
    const line = (r: { lines: string[] }) => r.lines.filter((l) => /^\S+\s+email /.test(l)).join('\n');

    const ok = await doctor(db, base);
    expect(ok.code, ok.lines.join('\n')).toBe(0);
    expect(line(ok)).toBe(
      'OK    email          signed in as bot@example.test (IMAP 127.0.0.1 opened INBOX, SMTP 127.0.0.1 took the login)',
    );
    vi.unstubAllEnvs();

    const refused = await doctor(db, { ...base, EMAIL_PASSWORD: 'not-the-password' });
    expect(refused.code).toBe(1);
    expect(refused.lines.join('\n')).toMatch(
      /^FAIL {2}email +the login was refused \(IMAP\)\n\s+fix: check EMAIL_USER and EMAIL_PASSWORD$/m,
    );
    expect(refused.lines.join('\n')).not.toContain('not-the-password');
    vi.unstubAllEnvs();

    // Nothing listens on the SMTP side: the IMAP login passes, the SMTP connection is refused.
    const closed = await doctor(db, { ...base, EMAIL_SMTP_PORT: String(await freePort()) });
    expect(closed.code).toBe(1);
    expect(line(closed)).toMatch(/^FAIL {2}email +cannot sign in: .*ECONNREFUSED/);
  });

  it('a row breaking a CHECK constraint is named by table, rowid and constraint, not called corrupt', async () => {
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    const w = openDatabase(db);
    // As a program that turned the checks off (or an older schema) can write it.
    w.pragma('ignore_check_constraints = ON');
    const bad = Number(
      w
        .prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:demo', 'u', ?)`)
        .run(Buffer.from('blob')).lastInsertRowid,
    );
    w.close();
    const r = await doctor(db, { GATED_GROUPS_DIR: join(dir, 'groups'), GATED_RUNTIME: 'process' });
    const text = r.lines.join('\n');
    // gated starts on such a file and fails the row alone: a warning, and doctor exits 0.
    expect(r.code, text).toBe(0);
    expect(text).toMatch(
      new RegExp(
        `^WARN {2}database .*gated\\.db: the file is sound, but rows break their constraints: messages row ${bad} breaks CHECK \\(typeof\\(chat_jid\\) = 'text'`,
        'm',
      ),
    );
    expect(text).toMatch(
      new RegExp(
        `^\\s+fix: correct or delete them \\(sqlite3 .*WHERE rowid IN \\(${bad}\\)"\\); gated fails them alone$`,
        'm',
      ),
    );
    expect(text).not.toMatch(/corrupt|failed its check|restore/);
  });

  it('a broken setup: each problem named with its fix, exit 1', async () => {
    const { telegram, discord, slack } = await platforms();
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    const newer = openDatabase(db);
    newer.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    newer.close();
    writeFileSync(join(dir, 'a-file'), 'not a folder');
    const r = await doctor(db, {
      GATED_GROUPS_DIR: join(dir, 'a-file', 'groups'),
      GATED_RUNTIME: 'docker',
      DOCKER_HOST: `unix://${join(dir, 'no-engine.sock')}`,
      TELEGRAM_BOT_TOKEN: '4242:wrong-token',
      TELEGRAM_API_ROOT: telegram.url,
      DISCORD_BOT_TOKEN: 'wrong-discord-token',
      DISCORD_API_ROOT: discord.apiRoot,
      SLACK_BOT_TOKEN: 'xoxb-wrong',
      SLACK_SIGNING_SECRET: 'a-signing-secret',
      SLACK_API_URL: slack.apiUrl,
    });
    expect(r.code).toBe(1);
    const text = r.lines.join('\n');
    expect(text).toMatch(/^OK {4}data folder/m);
    expect(text).toMatch(
      /^FAIL {2}groups folder .*a-file is a file, not a folder\n\s+fix: point GATED_GROUPS_DIR elsewhere$/m,
    );
    expect(text).toMatch(
      new RegExp(
        `^FAIL {2}database .*schema version ${SCHEMA_VERSION + 1}, newer than this gated \\(${SCHEMA_VERSION}\\)\\n\\s+fix: run the gated that wrote it`,
        'm',
      ),
    );
    expect(text).toMatch(
      /^FAIL {2}engine .*cannot be reached \(ENOENT\)\n\s+fix: start the Docker engine, or point DOCKER_HOST at it$/m,
    );
    expect(text).toMatch(
      /^FAIL {2}telegram .*the credentials were refused \(401\)\n\s+fix: check TELEGRAM_BOT_TOKEN$/m,
    );
    expect(text).toMatch(
      /^FAIL {2}discord .*the credentials were refused \(401\)\n\s+fix: check DISCORD_BOT_TOKEN$/m,
    );
    expect(text).toMatch(
      /^FAIL {2}slack .*the credentials were refused \(401\)\n\s+fix: check SLACK_BOT_TOKEN$/m,
    );
    expect(r.lines.at(-1)).toBe('6 problems to fix');
    // A disk this machine cannot fill for the test: statfs as a nearly full one answers.
    const full = diskFinding(db, (() => ({ bavail: 12_800, bsize: 4096 })) as unknown as typeof statfsSync);
    expect(full).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^0\.0 GiB free/) });
    // Neither token reaches the output.
    expect(text).not.toMatch(/wrong-token|wrong-discord-token|xoxb-wrong/);
  });

  it('a bundled agent a command runs without its packages installed is named, with the install step', async () => {
    const dir = tempDir();
    const db = join(dir, 'gated.db');
    const w = openDatabase(db);
    // A checkout of the agent's folder whose packages were never installed, run by a profile's command.
    const copy = join(dir, 'checkout');
    mkdirSync(join(copy, 'agents', 'codex'), { recursive: true });
    copyFileSync(
      packageFile('agents', 'codex', 'package.json'),
      join(copy, 'agents', 'codex', 'package.json'),
    );
    w.prepare(`INSERT INTO agent_profiles (name, command) VALUES ('cx', ?)`).run(
      `node "${copy}/agents/codex/agent.mjs"`,
    );
    w.close();
    const base = { GATED_GROUPS_DIR: join(dir, 'groups'), GATED_RUNTIME: 'process' };
    // This checkout's own agents are installed by the test setup (scripts/setup.d/15-agents.npm.sh).
    const own = await doctor(db, {
      ...base,
      GATED_AGENT_CMD: 'node "$GATED_HOME/agents/claude/agent.mjs"',
      GATED_CODEX_CMD: 'node "$GATED_HOME/agents/codex/agent.mjs"',
    });
    const text = own.lines.join('\n');
    expect(own.code, text).toBe(1);
    expect(text).toMatch(
      new RegExp(
        `^FAIL {2}agents +agent profile cx runs agents/codex but @modelcontextprotocol/sdk, @openai/codex-sdk is not installed in ${copy}/agents/codex\\n\\s+fix: run 'npm ci --prefix ${copy}/agents/codex'$`,
        'm',
      ),
    );
    const config = loadConfig({
      ...base,
      GATED_DB: db,
      GATED_AGENT_CMD: 'node "$GATED_HOME/agents/codex/agent.mjs"',
    });
    // $GATED_HOME pointing at that checkout: the fix is the install step the docs name.
    expect(bundledAgentsFinding(config, copy)).toEqual({
      name: 'agents',
      status: 'fail',
      detail: `GATED_AGENT_CMD runs agents/codex but @modelcontextprotocol/sdk, @openai/codex-sdk is not installed in ${copy}/agents/codex`,
      fix: `run 'npm run agents:install' in ${copy} (or 'npm ci --prefix ${copy}/agents/codex')`,
    });
    // This checkout, where they are installed; a codex group makes GATED_CODEX_CMD count too.
    const groups = openDatabase(db);
    groups.prepare(`DELETE FROM agent_profiles`).run();
    groups.prepare(`INSERT INTO registered_groups (folder, name, agent) VALUES ('cx', 'cx', 'codex')`).run();
    groups.close();
    const claude = loadConfig({
      ...base,
      GATED_DB: db,
      GATED_AGENT_CMD: 'node "$GATED_HOME/agents/claude/agent.mjs"',
    });
    expect(bundledAgentsFinding(claude)).toEqual({
      name: 'agents',
      status: 'ok',
      detail: 'packages installed for agents/claude (GATED_AGENT_CMD), agents/codex (GATED_CODEX_CMD)',
    });
    // The example agent needs nothing, and containers carry their own packages: no line at all.
    expect(bundledAgentsFinding(loadConfig({ ...base, GATED_DB: join(dir, 'none.db') }))).toBeUndefined();
    expect(bundledAgentsFinding({ ...claude, runtime: 'docker' })).toBeUndefined();
  });
});
