import type { Config, GithubAppConfig } from '../core/config.js';
import { PLATFORMS, type Platform } from '../core/platforms.js';
import { openDatabase } from '../store/db.js';
import type { Finding } from './doctor.js';

/** How long doctor waits for any one remote answer before calling the service unreachable. */
const REMOTE_TIMEOUT_MS = 10_000;

function timeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not answer in ${REMOTE_TIMEOUT_MS / 1000} s`)),
      REMOTE_TIMEOUT_MS,
    );
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** The images runs will need: the default one and any a group names (registered_groups.image). */
function imagesOf(config: Config): string[] {
  const images = [config.agentImage];
  try {
    const db = openDatabase(config.db, { noSchema: true });
    try {
      const has = db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'registered_groups'`).get();
      if (has) {
        const own = db
          .prepare('SELECT DISTINCT image FROM registered_groups WHERE image IS NOT NULL')
          .pluck();
        images.push(...(own.all() as string[]));
      }
    } finally {
      db.close();
    }
  } catch {
    // the database finding says what is wrong with the file; the default image is still worth checking
  }
  return [...new Set(images)];
}

/** The container engine of the docker and swarm runtimes: it answers, and holds every image runs need. */
export async function engineCheck(config: Config): Promise<Finding> {
  const { default: Docker } = await import('dockerode');
  const { engineOptions, describeAddress, checkEngine, EngineError } =
    await import('../queue/runtime/engine.js');
  const address = {
    host: config.dockerHost,
    tlsVerify: config.dockerTlsVerify,
    certPath: config.dockerCertPath,
  };
  const where = describeAddress(address);
  const images = imagesOf(config);
  try {
    const docker = new Docker(engineOptions(address));
    await timeout(checkEngine(docker, where, images), `the engine at ${where}`);
    return { name: 'engine', status: 'ok', detail: `${where} answers and holds ${images.join(', ')}` };
  } catch (err) {
    const problem = err instanceof EngineError ? err.problem : 'unreachable';
    const fixes: Record<string, string> = {
      address: 'set DOCKER_HOST to unix:///path or tcp://host:port',
      certificates: 'put ca.pem, cert.pem and key.pem in DOCKER_CERT_PATH',
      tls: 'check the certificates in DOCKER_CERT_PATH against the engine',
      unreachable: 'start the Docker engine, or point DOCKER_HOST at it',
      image_missing: 'build the agent image on that engine (docker/Dockerfile, or docker/build-offline.sh)',
      not_swarm: 'run docker swarm init on the manager, or use GATED_RUNTIME=docker',
    };
    return {
      name: 'engine',
      status: 'fail',
      detail: (err as Error).message,
      fix: fixes[problem] ?? fixes.unreachable!,
    };
  }
}

/** Slack's answers that mean the token itself was refused (HTTP 200 with ok: false). */
const SLACK_REFUSALS = new Set([
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
]);

/**
 * An HTTP status an error carries (telegraf's error_code, discord.js's, atproto's and Octokit's status), or
 * 401 for a Slack refusal, which arrives as an `error` string in a 200 answer.
 */
function statusOf(err: unknown): number | undefined {
  const e = err as {
    code?: unknown;
    status?: unknown;
    response?: { error_code?: unknown };
    data?: { error?: unknown };
  };
  if (typeof e?.data?.error === 'string' && SLACK_REFUSALS.has(e.data.error)) return 401;
  for (const v of [e?.response?.error_code, e?.status, e?.code]) if (typeof v === 'number') return v;
  return undefined;
}

/** A channel's check: `call` resolves with who the bot is; a refusal or no answer says what to fix. */
async function channelFinding(name: string, setting: string, call: () => Promise<string>): Promise<Finding> {
  try {
    return { name, status: 'ok', detail: `signed in as ${await timeout(call(), name)}` };
  } catch (err) {
    const status = statusOf(err);
    // A GitHub App's key or installation refused is the App's settings too, whatever its status (404).
    if (status === 401 || status === 403 || (err as Error | null)?.name === 'GithubAppRefused') {
      return {
        name,
        status: 'fail',
        detail: `the credentials were refused (${status})`,
        fix: `check ${setting}`,
      };
    }
    if (mailRefusal(err)) {
      return {
        name,
        status: 'fail',
        detail: `the login was refused (${mailRefusal(err)})`,
        fix: `check ${setting}`,
      };
    }
    const msg = (err as Error).message ?? String(err);
    return {
      name,
      status: 'fail',
      detail: `cannot sign in: ${msg.slice(0, 200)}`,
      fix: `check the network path to the platform${status ? '' : ' (and its API root setting, if set)'}`,
    };
  }
}

/** The checks of one platform's settings: none when it is not configured. */
type PlatformCheck = (config: Config) => Promise<Finding>[];

/** Each configured channel checked by a harmless authenticated call: who am I (core/platforms.ts, `doctor`). */
export async function channelChecks(config: Config): Promise<Finding[]> {
  const out: Promise<Finding>[] = [];
  for (const platform of Object.keys(PLATFORMS) as Platform[])
    out.push(...(CHECKS[platform]?.(config) ?? []));
  return Promise.all(out);
}

function telegramCheck({ telegram }: Config): Promise<Finding>[] {
  if (!telegram) return [];
  return [
    channelFinding('telegram', 'TELEGRAM_BOT_TOKEN', async () => {
      const { Telegram } = await import('telegraf');
      const root =
        telegram.apiRoot && !telegram.apiRoot.endsWith('/') ? `${telegram.apiRoot}/` : telegram.apiRoot;
      const me = await new Telegram(telegram.token, root ? { apiRoot: root } : {}).getMe();
      return `@${me.username} (getMe)`;
    }),
  ];
}

function discordCheck({ discord }: Config): Promise<Finding>[] {
  if (!discord) return [];
  return [
    channelFinding('discord', 'DISCORD_BOT_TOKEN', async () => {
      const { REST, Routes } = await import('discord.js');
      const rest = new REST({ ...(discord.apiRoot ? { api: discord.apiRoot } : {}), retries: 0 });
      const me = (await rest.setToken(discord.token).get(Routes.user())) as { username?: string };
      return `${me.username ?? '?'} (/users/@me)`;
    }),
  ];
}

function blueskyCheck({ bluesky }: Config): Promise<Finding>[] {
  if (!bluesky) return [];
  return [
    channelFinding('bluesky', 'BLUESKY_IDENTIFIER and BLUESKY_APP_PASSWORD', async () => {
      const { AtpAgent } = await import('@atproto/api');
      const agent = new AtpAgent({ service: bluesky.service });
      const res = await agent.login({ identifier: bluesky.identifier, password: bluesky.password });
      return `${res.data.handle} (a session on ${bluesky.service})`;
    }),
  ];
}

function slackCheck({ slack }: Config): Promise<Finding>[] {
  if (!slack) return [];
  return [
    channelFinding('slack', 'SLACK_BOT_TOKEN', async () => {
      const { WebClient } = await import('@slack/web-api');
      const web = new WebClient(slack.botToken, {
        ...(slack.apiUrl ? { slackApiUrl: slack.apiUrl } : {}),
        retryConfig: { retries: 0 },
      });
      const me = await web.auth.test();
      return `${me.user ?? '?'} in team ${me.team_id ?? '?'} (auth.test)`;
    }),
  ];
}

function githubCheck({ github }: Config): Promise<Finding>[] {
  const out: Promise<Finding>[] = [];
  const token = github?.token;
  if (token) {
    out.push(
      channelFinding('github', 'GITHUB_TOKEN', async () => {
        const { Octokit } = await import('@octokit/rest');
        const octokit = new Octokit({
          auth: token,
          ...(github.apiUrl ? { baseUrl: github.apiUrl } : {}),
        });
        const me = await octokit.rest.users.getAuthenticated();
        return `${me.data.login} (/user)`;
      }),
    );
  }
  if (github?.app) out.push(githubAppFinding(github.app, github.apiUrl));
  return out;
}

/** Each platform's check; null where the row says there is nothing remote to check (core/platforms.ts). */
const CHECKS: { [P in Platform]: PlatformCheck | null } = {
  telegram: telegramCheck,
  discord: discordCheck,
  bluesky: blueskyCheck,
  slack: slackCheck,
  github: githubCheck,
  email: emailCheck,
  web: null,
  local: null,
};

/**
 * A mail server's refusal of the login: imapflow marks an IMAP one `authenticationFailed`, nodemailer an
 * SMTP one with code EAUTH. Named by server, or undefined for anything else (unreachable, TLS, …).
 */
function mailRefusal(err: unknown): string | undefined {
  const e = err as { authenticationFailed?: unknown; code?: unknown } | null;
  if (e?.authenticationFailed === true) return 'IMAP';
  if (e?.code === 'EAUTH') return 'SMTP';
  return undefined;
}

/** Email's check: an IMAP login that opens the mailbox read, then an SMTP login (nodemailer's verify). */
function emailCheck({ email }: Config): Promise<Finding>[] {
  if (!email) return [];
  return [
    channelFinding('email', 'EMAIL_USER and EMAIL_PASSWORD', async () => {
      const { imap, smtp } = email;
      const { ImapFlow } = await import('imapflow');
      const { imapOptions, smtpOptions } = await import('../channels/email/servers.js');
      const client = new ImapFlow(imapOptions(imap, email, REMOTE_TIMEOUT_MS));
      // Without a listener a socket error after the answer would end doctor with an unhandled event.
      client.on('error', () => {});
      try {
        await client.connect();
        await client.mailboxOpen(email.mailbox, { readOnly: true });
      } finally {
        await client.logout().catch(() => client.close());
      }
      const { default: nodemailer } = await import('nodemailer');
      const transport = nodemailer.createTransport(smtpOptions(smtp, email, REMOTE_TIMEOUT_MS));
      try {
        await transport.verify();
      } finally {
        transport.close();
      }
      return `${email.user} (IMAP ${imap.host} opened ${email.mailbox}, SMTP ${smtp.host} took the login)`;
    }),
  ];
}

/** The GitHub App's check: its slug under its JWT, then one installation token minted with it. */
function githubAppFinding(app: GithubAppConfig, apiUrl: string | undefined): Promise<Finding> {
  return channelFinding('github', 'GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID and the key file', async () => {
    const { readFile } = await import('node:fs/promises');
    const { InstallationTokens } = await import('../channels/github/app-auth.js');
    const { silentLogger } = await import('../core/log.js');
    const tokens = new InstallationTokens({
      app: { ...app, privateKey: await readFile(app.privateKeyFile, 'utf8') },
      log: silentLogger(),
      ...(apiUrl ? { apiUrl } : {}),
    });
    const slug = await tokens.slug();
    await tokens.token();
    return `${slug}[bot] (/app, an installation token for ${app.installationId})`;
  });
}
