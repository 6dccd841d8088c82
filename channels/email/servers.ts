import type { ImapFlowOptions } from 'imapflow';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import type { MailServer } from '../../core/config.js';

/** The login both mail servers take (EMAIL_USER, EMAIL_PASSWORD). */
export interface MailLogin {
  user: string;
  password: string;
}

/**
 * How imapflow reaches the IMAP server: the channel's reader (mailbox.ts) and `gated doctor` connect the
 * same way, so what doctor accepts is what the channel will do. Types only: imapflow is imported by the
 * caller, when email is configured.
 */
export function imapOptions(server: MailServer, login: MailLogin, timeoutMs: number): ImapFlowOptions {
  return {
    host: server.host,
    port: server.port,
    secure: server.security === 'tls',
    doSTARTTLS: server.security === 'starttls' ? true : server.security === 'none' ? false : undefined,
    auth: { user: login.user, pass: login.password },
    logger: false,
    connectionTimeout: timeoutMs,
  };
}

/** How nodemailer reaches the SMTP server: the channel's send path (send.ts) and `gated doctor` alike. */
export function smtpOptions(server: MailServer, login: MailLogin, timeoutMs: number): SMTPTransport.Options {
  return {
    host: server.host,
    port: server.port,
    secure: server.security === 'tls',
    requireTLS: server.security === 'starttls',
    ignoreTLS: server.security === 'none',
    auth: { user: login.user, pass: login.password },
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  };
}
