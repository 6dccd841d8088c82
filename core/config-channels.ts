/**
 * The platforms' settings (TELEGRAM_*, BLUESKY_*, DISCORD_*, SLACK_*, GITHUB_*, EMAIL_*): each platform is
 * on when its credentials are set, and a half-made one fails with a UsageError that names what is missing.
 */
import { isIP } from 'node:net';
import { UsageError } from './errors.js';
import { int, list, onOff, str, type Env } from './config-read.js';

/** The configured platforms; undefined: that platform is off. */
export interface ChannelsConfig {
  telegram: { token: string; apiRoot: string | undefined } | undefined;
  bluesky: { service: string; identifier: string; password: string; pollMs: number } | undefined;
  discord: { token: string; apiRoot: string | undefined } | undefined;
  /**
   * Slack (docs/CHANNELS.md): on with SLACK_BOT_TOKEN plus SLACK_APP_TOKEN (Socket Mode) and/or
   * SLACK_SIGNING_SECRET (the HTTP Events API at `/hooks/slack`). SLACK_API_URL points it at another server.
   */
  slack:
    { botToken: string; appToken?: string; signingSecret?: string; apiUrl: string | undefined } | undefined;
  /**
   * GitHub (docs/CHANNELS.md): on with GITHUB_WEBHOOK_SECRET (deliveries at `/hooks/github`) and either
   * GITHUB_TOKEN or a GitHub App (GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID, GITHUB_APP_PRIVATE_KEY_FILE).
   * GITHUB_API_URL points it at another server (GitHub Enterprise, tests).
   */
  github:
    | {
        token?: string;
        app?: GithubAppConfig;
        webhookSecret: string;
        apiUrl: string | undefined;
        /** GITHUB_WORKTREES=1: groups serving a repository's chats are bound to it (docs/WORKTREES.md). */
        worktrees: boolean;
      }
    | undefined;
  /** The email channel (docs/CHANNELS.md, "Email"): on when EMAIL_ADDRESS and EMAIL_PASSWORD are set. */
  email: EmailConfig | undefined;
}

/** Reads every platform's settings. */
export function channelsConfig(env: Env): ChannelsConfig {
  const tgToken = str(env, 'TELEGRAM_BOT_TOKEN');
  const bsId = str(env, 'BLUESKY_IDENTIFIER');
  const bsPass = str(env, 'BLUESKY_APP_PASSWORD');
  const dcToken = str(env, 'DISCORD_BOT_TOKEN');
  return {
    telegram: tgToken ? { token: tgToken, apiRoot: str(env, 'TELEGRAM_API_ROOT') } : undefined,
    bluesky:
      bsId && bsPass
        ? {
            service: str(env, 'BLUESKY_SERVICE') ?? 'https://bsky.social',
            identifier: bsId,
            password: bsPass,
            pollMs: int(env, 'BLUESKY_POLL_MS', 5000, 100),
          }
        : undefined,
    discord: dcToken ? { token: dcToken, apiRoot: str(env, 'DISCORD_API_ROOT') } : undefined,
    slack: slackConfig(env),
    github: githubConfig(env),
    email: emailConfig(env),
  };
}

/** How a mail connection is protected: TLS from the start, STARTTLS after the greeting, or none (tests). */
export type MailSecurity = 'tls' | 'starttls' | 'none';

/** One mail server: IMAP (in) or SMTP (out). */
export interface MailServer {
  host: string;
  port: number;
  security: MailSecurity;
}

/** The email channel's settings (EMAIL_*). The password never leaves this object but for the login. */
export interface EmailConfig {
  /** The bot's address: mail to it is read, mail from it is ignored, replies are sent from it. */
  address: string;
  /** The login of both servers (EMAIL_USER, default the address). */
  user: string;
  password: string;
  imap: MailServer;
  smtp: MailServer;
  /** The folder read (EMAIL_MAILBOX, default INBOX). */
  mailbox: string;
  /** Display name on sent mail (EMAIL_FROM_NAME), or none. */
  fromName: string | undefined;
  /** How a sender's address is authenticated (docs/CHANNELS.md, "Email", "Who sent it"). */
  auth: MailAuthConfig;
}

/** Where the verdict on a mail's From comes from. */
export interface MailAuthConfig {
  /**
   * EMAIL_AUTHSERV_IDS: the authserv-ids (lower case) of receiving servers whose `Authentication-Results`
   * header gated believes; empty: gated believes none and checks DKIM and DMARC itself.
   */
  authservIds: string[];
  /** EMAIL_DNS_SERVERS: the DNS servers (`host` or `host:port`) gated's own checks ask; empty: the system's. */
  dnsServers: string[];
}

function security(env: Env, key: string, dflt: MailSecurity): MailSecurity {
  const v = str(env, key) ?? dflt;
  if (v !== 'tls' && v !== 'starttls' && v !== 'none')
    throw new UsageError(`${key} must be 'tls', 'starttls' or 'none', got '${v}'`);
  return v;
}

/** EMAIL_*: undefined without an address and a password; then both hosts are required. */
function emailConfig(env: Env): EmailConfig | undefined {
  const address = str(env, 'EMAIL_ADDRESS');
  const password = env.EMAIL_PASSWORD;
  if (!address || !password) return undefined;
  if (!/^[^\s@<>]+@[^\s@<>]+$/.test(address))
    throw new UsageError(`EMAIL_ADDRESS must be a mail address, got '${address}'`);
  const host = (key: string) => {
    const h = str(env, key);
    if (!h) throw new UsageError(`EMAIL_ADDRESS and EMAIL_PASSWORD are set but ${key} is not`);
    return h;
  };
  const imapSecurity = security(env, 'EMAIL_IMAP_SECURITY', 'tls');
  const smtpSecurity = security(env, 'EMAIL_SMTP_SECURITY', 'tls');
  return {
    address: address.toLowerCase(),
    user: str(env, 'EMAIL_USER') ?? address,
    password,
    imap: {
      host: host('EMAIL_IMAP_HOST'),
      port: int(env, 'EMAIL_IMAP_PORT', imapSecurity === 'tls' ? 993 : 143, 1),
      security: imapSecurity,
    },
    smtp: {
      host: host('EMAIL_SMTP_HOST'),
      port: int(env, 'EMAIL_SMTP_PORT', smtpSecurity === 'tls' ? 465 : 587, 1),
      security: smtpSecurity,
    },
    mailbox: str(env, 'EMAIL_MAILBOX') ?? 'INBOX',
    fromName: str(env, 'EMAIL_FROM_NAME'),
    auth: {
      authservIds: list(env, 'EMAIL_AUTHSERV_IDS', '', true),
      dnsServers: list(env, 'EMAIL_DNS_SERVERS').map(dnsServer),
    },
  };
}

/** One EMAIL_DNS_SERVERS entry: an IP address, with a port after `:` (IPv6 in brackets: `[::1]:53`). */
function dnsServer(entry: string): string {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry) ?? /^([^:]+)(?::(\d+))?$/.exec(entry);
  const port = m?.[2] === undefined ? 53 : Number(m[2]);
  if (!m || isIP(m[1]!) === 0 || port < 1 || port > 65535)
    throw new UsageError(`EMAIL_DNS_SERVERS entries are IP addresses with an optional :port, got '${entry}'`);
  return entry;
}

/** Slack's settings: a bot token and at least one way in (Socket Mode's app token, or a signing secret). */
function slackConfig(env: Env): ChannelsConfig['slack'] {
  const botToken = str(env, 'SLACK_BOT_TOKEN');
  const appToken = str(env, 'SLACK_APP_TOKEN');
  const signingSecret = str(env, 'SLACK_SIGNING_SECRET');
  if (!botToken) return undefined;
  if (!appToken && !signingSecret) {
    throw new UsageError('SLACK_BOT_TOKEN needs SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET');
  }
  return {
    botToken,
    ...(appToken ? { appToken } : {}),
    ...(signingSecret ? { signingSecret } : {}),
    apiUrl: str(env, 'SLACK_API_URL'),
  };
}

/** A GitHub App installation to answer as; the key file is read when the channel is made. */
export interface GithubAppConfig {
  appId: string;
  installationId: string;
  privateKeyFile: string;
}

const APP_SETTINGS = ['GITHUB_APP_ID', 'GITHUB_APP_INSTALLATION_ID', 'GITHUB_APP_PRIVATE_KEY_FILE'] as const;

/** GitHub's settings: a token or an App to answer with, and the secret deliveries are signed with. */
function githubConfig(env: Env): ChannelsConfig['github'] {
  const token = str(env, 'GITHUB_TOKEN');
  const webhookSecret = str(env, 'GITHUB_WEBHOOK_SECRET');
  const [appId, installationId, privateKeyFile] = APP_SETTINGS.map((k) => str(env, k));
  const anyApp = appId || installationId || privateKeyFile;
  if (!token && !anyApp && !webhookSecret) return undefined;
  if (token && anyApp) throw new UsageError('GitHub takes GITHUB_TOKEN or GITHUB_APP_*, not both');
  if (anyApp && !(appId && installationId && privateKeyFile)) {
    const missing = APP_SETTINGS.filter((k) => !str(env, k));
    throw new UsageError(`a GitHub App needs ${missing.join(' and ')} as well`);
  }
  if (!webhookSecret || !(token || anyApp)) {
    throw new UsageError('GitHub needs GITHUB_WEBHOOK_SECRET and GITHUB_TOKEN (or a GitHub App)');
  }
  for (const [k, v] of [
    ['GITHUB_APP_ID', appId],
    ['GITHUB_APP_INSTALLATION_ID', installationId],
  ] as const) {
    if (v && !/^\d+$/.test(v)) throw new UsageError(`${k} must be a number, got '${v}'`);
  }
  const app =
    appId && installationId && privateKeyFile ? { appId, installationId, privateKeyFile } : undefined;
  return {
    ...(token ? { token } : {}),
    ...(app ? { app } : {}),
    webhookSecret,
    apiUrl: str(env, 'GITHUB_API_URL'),
    worktrees: onOff(env, 'GITHUB_WORKTREES', false),
  };
}
