import { describe, expect, it } from 'vitest';
import { loadConfig, loadDotEnv } from '../../core/config.js';
import { UsageError } from '../../core/errors.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../helpers/db.js';

describe('configuration', () => {
  it('has the documented defaults and starts no platform without credentials', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ pollMs: 2000, maxConcurrent: 5, runtime: 'process', httpHost: '127.0.0.1' });
    // No idle budget unless one is set; 0 is a budget (no agent waits idle).
    expect(c.idleAgentsMax).toBeNull();
    expect(loadConfig({ GATED_IDLE_AGENTS_MAX: '3' }).idleAgentsMax).toBe(3);
    expect(loadConfig({ GATED_IDLE_AGENTS_MAX: '0' }).idleAgentsMax).toBe(0);
    // Swarm: services made ahead of a lane's next run, unless turned off.
    expect(c.swarmSpares).toBe(8);
    expect(loadConfig({ GATED_SWARM_SPARES: '0' }).swarmSpares).toBe(0);
    // Group commit is on unless turned off.
    expect(c.groupCommit).toBe(true);
    expect(loadConfig({ GATED_GROUP_COMMIT: '0' }).groupCommit).toBe(false);
    expect(c.db).toMatch(/data\/gated\.db$/);
    expect([c.telegram, c.bluesky, c.discord]).toEqual([undefined, undefined, undefined]);
    expect(loadConfig({ TELEGRAM_BOT_TOKEN: '  ', DISCORD_BOT_TOKEN: '' }).telegram).toBeUndefined();
    expect(loadConfig({ BLUESKY_IDENTIFIER: 'bot' }).bluesky).toBeUndefined();
  });

  it('starts Slack with a bot token and a way in, GitHub with a token and a secret', () => {
    expect([loadConfig({}).slack, loadConfig({}).github]).toEqual([undefined, undefined]);
    expect(loadConfig({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1' }).slack).toEqual({
      botToken: 'xoxb-1',
      appToken: 'xapp-1',
      apiUrl: undefined,
    });
    expect(loadConfig({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_SIGNING_SECRET: 's' }).slack).toMatchObject({
      signingSecret: 's',
    });
    expect(() => loadConfig({ SLACK_BOT_TOKEN: 'xoxb-1' })).toThrow(
      /SLACK_APP_TOKEN .* or SLACK_SIGNING_SECRET/,
    );
    expect(loadConfig({ GITHUB_TOKEN: 't', GITHUB_WEBHOOK_SECRET: 'w' }).github).toEqual({
      token: 't',
      webhookSecret: 'w',
      apiUrl: undefined,
      worktrees: false,
    });
    expect(
      loadConfig({ GITHUB_TOKEN: 't', GITHUB_WEBHOOK_SECRET: 'w', GITHUB_WORKTREES: '1' }).github,
    ).toMatchObject({
      worktrees: true,
    });
    expect(() =>
      loadConfig({ GITHUB_TOKEN: 't', GITHUB_WEBHOOK_SECRET: 'w', GITHUB_WORKTREES: 'on' }),
    ).toThrow(/GITHUB_WORKTREES must be 0 or 1/);
    expect(() => loadConfig({ GITHUB_TOKEN: 't' })).toThrow(/GITHUB_WEBHOOK_SECRET/);
    // Retired: a setting that would be ignored is refused, naming what replaced it.
    expect(() => loadConfig({ GATED_TOOL_DEFAULT: 'deny' })).toThrow(
      /GATED_TOOL_DEFAULT is retired: .*gated groups autonomy FOLDER/,
    );
    const app = {
      GITHUB_APP_ID: '123',
      GITHUB_APP_INSTALLATION_ID: '456',
      GITHUB_APP_PRIVATE_KEY_FILE: '/k.pem',
    };
    expect(loadConfig({ ...app, GITHUB_WEBHOOK_SECRET: 'w' }).github).toEqual({
      app: { appId: '123', installationId: '456', privateKeyFile: '/k.pem' },
      webhookSecret: 'w',
      apiUrl: undefined,
      worktrees: false,
    });
    expect(() => loadConfig({ GITHUB_APP_ID: '123', GITHUB_WEBHOOK_SECRET: 'w' })).toThrow(
      /GITHUB_APP_INSTALLATION_ID and GITHUB_APP_PRIVATE_KEY_FILE/,
    );
    expect(() => loadConfig({ ...app, GITHUB_TOKEN: 't', GITHUB_WEBHOOK_SECRET: 'w' })).toThrow(/not both/);
    expect(() => loadConfig({ ...app, GITHUB_APP_ID: 'my-app', GITHUB_WEBHOOK_SECRET: 'w' })).toThrow(
      /GITHUB_APP_ID must be a number/,
    );
    expect(() => loadConfig({ GITHUB_WEBHOOK_SECRET: 'w' })).toThrow(/GITHUB_TOKEN \(or a GitHub App\)/);
  });

  it('starts email with an address and a password, and then requires both hosts', () => {
    expect(loadConfig({ EMAIL_ADDRESS: 'bot@example.com' }).email).toBeUndefined();
    const mail = { EMAIL_ADDRESS: 'Bot@Example.com', EMAIL_PASSWORD: 'app-pw' };
    expect(() => loadConfig(mail)).toThrow(/EMAIL_IMAP_HOST is not/);
    expect(() => loadConfig({ ...mail, EMAIL_IMAP_HOST: 'imap.example.com' })).toThrow(/EMAIL_SMTP_HOST/);
    const hosts = { EMAIL_IMAP_HOST: 'imap.example.com', EMAIL_SMTP_HOST: 'smtp.example.com' };
    expect(loadConfig({ ...mail, ...hosts }).email).toEqual({
      address: 'bot@example.com',
      user: 'Bot@Example.com',
      password: 'app-pw',
      imap: { host: 'imap.example.com', port: 993, security: 'tls' },
      smtp: { host: 'smtp.example.com', port: 465, security: 'tls' },
      mailbox: 'INBOX',
      fromName: undefined,
      auth: { authservIds: [], dnsServers: [] },
    });
    const auth = {
      EMAIL_AUTHSERV_IDS: 'MX.Example.com, mx2.example.com',
      EMAIL_DNS_SERVERS: '127.0.0.1:5353',
    };
    expect(loadConfig({ ...mail, ...hosts, ...auth }).email!.auth).toEqual({
      authservIds: ['mx.example.com', 'mx2.example.com'],
      dnsServers: ['127.0.0.1:5353'],
    });
    expect(() => loadConfig({ ...mail, ...hosts, EMAIL_DNS_SERVERS: 'dns.example.com' })).toThrow(
      /EMAIL_DNS_SERVERS entries are IP addresses/,
    );
    const starttls = loadConfig({ ...mail, ...hosts, EMAIL_SMTP_SECURITY: 'starttls' }).email!;
    expect(starttls.smtp.port).toBe(587);
    expect(() => loadConfig({ ...mail, ...hosts, EMAIL_IMAP_SECURITY: 'ssl' })).toThrow(
      /EMAIL_IMAP_SECURITY/,
    );
    expect(() => loadConfig({ ...mail, ...hosts, EMAIL_ADDRESS: 'bot' })).toThrow(/EMAIL_ADDRESS/);
  });

  it('names the bad variable on bad input', () => {
    expect(() => loadConfig({ GATED_POLL_MS: 'fast' })).toThrow(UsageError);
    expect(() => loadConfig({ GATED_POLL_MS: 'fast' })).toThrow(/GATED_POLL_MS/);
    expect(() => loadConfig({ GATED_MAX_CONCURRENT: '0' })).toThrow(
      /GATED_MAX_CONCURRENT must be an integer >= 1/,
    );
    expect(() => loadConfig({ GATED_RUNTIME: 'vm' })).toThrow(/GATED_RUNTIME/);
    expect(() => loadConfig({ GATED_IDLE_AGENTS_MAX: 'few' })).toThrow(
      /GATED_IDLE_AGENTS_MAX must be an integer >= 0/,
    );
    expect(() => loadConfig({ GATED_GROUP_COMMIT: 'yes' })).toThrow(
      /GATED_GROUP_COMMIT must be 0 or 1, got 'yes'/,
    );
  });

  it('collects agent secrets by name and refuses names that are not set', () => {
    const c = loadConfig({ GATED_AGENT_SECRETS: 'API_KEY, OTHER', API_KEY: 'k1', OTHER: 'k2' });
    expect(c.agentSecrets).toEqual({ API_KEY: 'k1', OTHER: 'k2' });
    expect(() => loadConfig({ GATED_AGENT_SECRETS: 'MISSING' })).toThrow(/MISSING, which is not set/);
    expect(() => loadConfig({ GATED_AGENT_SECRETS: 'bad-name', 'bad-name': 'x' })).toThrow(
      /bad entry 'bad-name'/,
    );
  });

  it('reads per-group secrets, renamed from another variable, apart from the shared ones', () => {
    const c = loadConfig({
      GATED_AGENT_SECRETS: 'API_KEY, ops/db:TOKEN=OPS_TOKEN, sales:TOKEN',
      API_KEY: 'k1',
      OPS_TOKEN: 't-ops',
      TOKEN: 't-sales',
    });
    expect(c.agentSecrets).toEqual({ API_KEY: 'k1' });
    expect(c.groupSecrets).toEqual({ 'ops/db': { TOKEN: 't-ops' }, sales: { TOKEN: 't-sales' } });
    expect(() => loadConfig({ GATED_AGENT_SECRETS: 'ops:TOKEN=NOPE' })).toThrow(/NOPE, which is not set/);
  });

  it('reads .env without overriding the environment', () => {
    const file = join(tempDir(), '.env');
    writeFileSync(
      file,
      '# comment\nGATED_POLL_MS=500\nexport GATED_ADMINS="a,b"\nGATED_DB=/from/file\nbroken line\n',
    );
    const env: Record<string, string | undefined> = { GATED_DB: '/from/env' };
    loadDotEnv(file, env);
    const c = loadConfig(env);
    expect(c.pollMs).toBe(500);
    expect(c.admins).toEqual(['a', 'b']);
    expect(c.db).toBe('/from/env');
  });
});
