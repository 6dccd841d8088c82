/**
 * A small mail world for the email channel's tests: one Dovecot (IMAP, LMTP, auth) and one Postfix (SMTP,
 * delivering `example.test` into that Dovecot) with a bot account and a few people. People send through
 * the real Postfix with nodemailer and read their own mailbox with imapflow, as a mail client would.
 * `example.test` signs its mail with DKIM, as a real provider does (nodemailer signs each mail it sends
 * unless told not to), and a local DNS server (test/infra/dns.ts) publishes the key and a DMARC policy of
 * `reject`: gated checks them there (EMAIL_DNS_SERVERS).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ImapFlow } from 'imapflow';
import { simpleParser, type ParsedMail } from 'mailparser';
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';
import type { EmailConfig } from '../../core/config.js';
import { dkimKey, startDns, type DnsServer } from './dns.js';
import { startDovecot, type DovecotServer } from './dovecot.js';
import { startPostfix, type PostfixServer } from './postfix.js';

/** The bot's account. */
export const BOT = { address: 'bot@example.test', password: 'bot-app-password' };

/** A mail as its recipient sees it. */
export interface ReadMail {
  uid: number;
  mail: ParsedMail;
}

/** The running servers and what a test does with them. */
export interface MailWorld {
  dovecot: DovecotServer;
  postfix: PostfixServer;
  /** Publishes example.test's DKIM key (selector `mail`) and DMARC policy. */
  dns: DnsServer;
  /** The email channel's settings for the bot against these servers. */
  config(): EmailConfig;
  /**
   * `who` sends a mail through Postfix, logged in as `who` (or, with `login: false`, as a client of the
   * trusted loopback network: Dovecot checks logins, and it may be down); resolves with its Message-ID.
   * The mail is signed with example.test's DKIM key unless `sign: false` (`mail.from` and `mail.envelope`
   * override the From header and the envelope: a forger's mail).
   */
  send(who: string, mail: Mail.Options, opts?: { login?: boolean; sign?: boolean }): Promise<string>;
  /** Puts a raw mail straight into `who`'s INBOX (IMAP APPEND), as a second delivery of the same mail. */
  append(who: string, source: Buffer | string): Promise<void>;
  /** Waits until Postfix has handed every accepted mail to Dovecot (its queue is empty). */
  settled(timeoutMs?: number): Promise<void>;
  /** The mails in `who`'s INBOX with a UID above `afterUid`, oldest first (after `settled`). */
  inbox(who: string, afterUid?: number): Promise<ReadMail[]>;
  /** The UID the next mail to `who` will get. */
  nextUid(who: string): Promise<number>;
  stop(): Promise<void>;
}

const password = (who: string) => (who === BOT.address ? BOT.password : `${who}-pw`);

/** Starts Dovecot and Postfix with the bot and `people` (addresses at example.test). */
/** The EMAIL_* settings with which a whole gated reads and sends through `world`'s servers (plain, loopback). */
export function emailEnv(world: MailWorld): Record<string, string> {
  const config = world.config();
  return {
    EMAIL_ADDRESS: config.address,
    EMAIL_PASSWORD: config.password,
    EMAIL_IMAP_HOST: '127.0.0.1',
    EMAIL_IMAP_PORT: String(config.imap.port),
    EMAIL_IMAP_SECURITY: 'none',
    EMAIL_SMTP_HOST: '127.0.0.1',
    EMAIL_SMTP_PORT: String(config.smtp.port),
    EMAIL_SMTP_SECURITY: 'none',
    EMAIL_DNS_SERVERS: world.dns.address,
  };
}

/** The DKIM selector example.test signs with. */
export const DKIM_SELECTOR = 'mail';

export async function startMailWorld(people: string[]): Promise<MailWorld> {
  const accounts = [BOT, ...people.map((address) => ({ address, password: password(address) }))];
  const dns = await startDns();
  const key = dkimKey();
  dns.txt(`${DKIM_SELECTOR}._domainkey.example.test`, key.record);
  dns.txt('_dmarc.example.test', 'v=DMARC1; p=reject');
  let dovecot: DovecotServer;
  let postfix: PostfixServer;
  try {
    dovecot = await startDovecot(accounts);
  } catch (err) {
    await dns.stop();
    throw err;
  }
  try {
    postfix = await startPostfix(dovecot);
  } catch (err) {
    await dovecot.stop();
    await dns.stop();
    throw err;
  }
  const imap = async <T>(who: string, fn: (c: ImapFlow) => Promise<T>): Promise<T> => {
    const c = new ImapFlow({
      host: '127.0.0.1',
      port: dovecot.imapPort,
      secure: false,
      doSTARTTLS: false,
      auth: { user: who, pass: password(who) },
      logger: false,
    });
    c.on('error', () => undefined);
    await c.connect();
    try {
      await c.mailboxOpen('INBOX');
      return await fn(c);
    } finally {
      await c.logout().catch(() => c.close());
    }
  };
  const queueDir = postfix.queueDir;
  const queued = () =>
    ['maildrop', 'incoming', 'active', 'deferred'].some((q) => {
      const dir = join(queueDir, q);
      // Postfix leaves its hashed subfolders behind: only files are mail.
      return (
        existsSync(dir) && readdirSync(dir, { recursive: true, withFileTypes: true }).some((e) => e.isFile())
      );
    });
  return {
    dovecot,
    postfix,
    dns,
    config: () => ({
      address: BOT.address,
      user: BOT.address,
      password: BOT.password,
      imap: { host: '127.0.0.1', port: dovecot.imapPort, security: 'none' },
      smtp: { host: '127.0.0.1', port: postfix.smtpPort, security: 'none' },
      mailbox: 'INBOX',
      fromName: 'Bot',
      auth: { authservIds: [], dnsServers: [dns.address] },
    }),
    async send(who, mail, opts = {}) {
      const t = nodemailer.createTransport({
        host: '127.0.0.1',
        port: postfix.smtpPort,
        secure: false,
        ignoreTLS: true,
        ...(opts.login === false ? {} : { auth: { user: who, pass: password(who) } }),
        ...(opts.sign === false
          ? {}
          : {
              dkim: { domainName: 'example.test', keySelector: DKIM_SELECTOR, privateKey: key.privateKey },
            }),
      });
      try {
        const info = await t.sendMail({ from: who, ...mail });
        return info.messageId;
      } finally {
        t.close();
      }
    },
    append: (who, source) => imap(who, async (c) => void (await c.append('INBOX', source))),
    async settled(timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (queued()) {
        if (Date.now() > deadline) throw new Error('postfix still has mail queued');
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    inbox: (who, afterUid = 0) =>
      imap(who, async (c) => {
        const out: ReadMail[] = [];
        const uids = ((await c.search({ uid: `${afterUid + 1}:*` }, { uid: true })) || []).filter(
          (u) => u > afterUid,
        );
        for (const uid of uids.sort((a, b) => a - b)) {
          const m = await c.fetchOne(String(uid), { source: true }, { uid: true });
          if (m && m.source) out.push({ uid, mail: await simpleParser(m.source) });
        }
        return out;
      }),
    nextUid: (who) => imap(who, async (c) => Number(c.mailbox && c.mailbox.uidNext)),
    async stop() {
      await postfix.stop();
      await dovecot.stop();
      await dns.stop();
    },
  };
}
