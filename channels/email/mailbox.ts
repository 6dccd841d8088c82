import { ImapFlow } from 'imapflow';
import { abortableSleep, backoffDelay, type Sleep } from '../../core/backoff.js';
import type { MailServer } from '../../core/config.js';
import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Db } from '../../store/db.js';
import { whenWritable } from '../../store/group-commit.js';
import { getState, setState } from '../../store/state.js';
import { imapOptions } from './servers.js';

/** router_state key of the mailbox cursor: `{"validity":"…","uid":N,"at":"ISO"}`. */
export const EMAIL_CURSOR_KEY = 'email.cursor';

/** Where reading stopped: the last UID stored under a UIDVALIDITY, and when that mail arrived. */
interface Cursor {
  validity: string;
  uid: number;
  at: string;
}

/** One mail fetched from the mailbox. */
export interface RawMail {
  source: Buffer;
  validity: string;
  uid: number;
  received: Date;
}

/** What the mailbox reader needs. */
export interface MailboxOptions {
  server: MailServer;
  user: string;
  password: string;
  mailbox: string;
  db: Db;
  log: Logger;
  /** Stores one mail (parses it, writes its row); the cursor moves past it only after this resolves. */
  onMail(mail: RawMail): Promise<void>;
  /** Reads the mailbox again this often even without word from IDLE, in ms. Default 60000. */
  pollMs?: number;
  sleep?: Sleep;
}

/**
 * Reads one IMAP mailbox with imapflow: catches up on connect, then waits in IDLE for the server's word
 * of new mail (and reads again every `pollMs` in case that word is lost). The cursor (UIDVALIDITY and the
 * last UID stored) lives in router_state and moves only after a mail's row is stored, so a crash between
 * fetching and storing fetches that mail again, and its Message-ID keeps it from being stored twice. A
 * lost connection (the server restarted, the network dropped) is reopened with backoff; the catch-up then
 * reads whatever arrived meanwhile.
 */
export class MailboxReader {
  private readonly sleep: Sleep;
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  private client: ImapFlow | undefined;
  private validity: string | undefined;

  constructor(private readonly opts: MailboxOptions) {
    this.sleep = opts.sleep ?? abortableSleep;
  }

  /**
   * Connects once and begins reading. A refused login fails the start; an unreachable server does not:
   * the reader keeps trying in the background, as the other channels do.
   */
  async start(): Promise<void> {
    if (this.loop) return;
    this.abort = new AbortController();
    let first: ImapFlow | undefined;
    try {
      first = await this.connect();
    } catch (err) {
      if (isLoginRefused(err)) throw new Error(`IMAP login refused for ${this.opts.user}`);
      this.opts.log.warn({ err: coerceError(err).message }, 'imap unreachable; retrying in the background');
    }
    this.loop = this.run(first);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    this.loop = undefined;
  }

  /** The whole source of a mail, if the mailbox still has it under the same UIDVALIDITY. */
  async fetchSource(validity: string, uid: number): Promise<Buffer> {
    const client = this.client;
    if (!client?.usable || this.validity === undefined) throw new Error('imap not connected');
    if (validity !== this.validity) throw new Error(`mailbox changed (uidvalidity ${validity} is gone)`);
    const msg = await client.fetchOne(String(uid), { source: true }, { uid: true });
    if (!msg || !msg.source) throw new Error(`mail uid ${uid} is gone from the mailbox`);
    return msg.source;
  }

  private async connect(): Promise<ImapFlow> {
    const { server } = this.opts;
    const client = new ImapFlow({
      ...imapOptions(server, this.opts, 30_000),
      // imapflow waits 15 s after the last command before it enters IDLE, and mail arriving meanwhile is
      // heard of only then: the reader issues a command only when there is mail, so IDLE at once.
      autoIdleDelay: 200,
    });
    // Without a listener an 'error' event would end the process; the 'close' that follows reconnects.
    client.on('error', (err: unknown) =>
      this.opts.log.warn({ err: coerceError(err).message }, 'imap connection error'),
    );
    await client.connect();
    await client.mailboxOpen(this.opts.mailbox);
    const mailbox = client.mailbox;
    if (!mailbox) throw new Error(`mailbox ${this.opts.mailbox} did not open`);
    this.validity = String(mailbox.uidValidity);
    if (getState(this.opts.db, EMAIL_CURSOR_KEY) === undefined) {
      // A first start reads mail from now on, not the mailbox's whole past. Saved here, before start()
      // resolves, so a mail that arrives right after is read, not taken for the past.
      await this.save({
        validity: this.validity,
        uid: Number(mailbox.uidNext) - 1,
        at: new Date().toISOString(),
      });
      this.opts.log.info('email: first start, reading mail that arrives from now on');
    }
    this.client = client;
    this.opts.log.info({ mailbox: this.opts.mailbox }, 'imap reading');
    return client;
  }

  private async run(first: ImapFlow | undefined): Promise<void> {
    const signal = this.abort.signal;
    let client = first;
    for (let failures = 0; !signal.aborted;) {
      try {
        client ??= await this.connect();
        failures = 0;
        await this.session(client);
      } catch (err) {
        if (signal.aborted) break;
        failures += 1;
        const level = isLoginRefused(err) ? 'error' : 'warn';
        this.opts.log[level]({ err: coerceError(err).message, attempt: failures }, 'imap session ended');
      } finally {
        client?.close();
        client = undefined;
        this.client = undefined;
      }
      if (signal.aborted) break;
      await this.sleep(backoffDelay(Math.max(1, failures), { baseMs: 500, maxMs: 15_000 }), signal);
    }
  }

  /** Reads until the connection closes (throws) or the reader stops (returns). */
  private async session(client: ImapFlow): Promise<void> {
    const signal = this.abort.signal;
    let wake: (() => void) | undefined;
    let pending = true;
    const kick = () => {
      pending = true;
      wake?.();
    };
    client.on('exists', kick);
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    const stopped = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
    let gone = false;
    void closed.then(() => (gone = true));
    while (!signal.aborted && !gone) {
      if (pending) {
        pending = false;
        await this.catchUp(client);
        continue;
      }
      const nap = new AbortController();
      const tick = this.sleep(this.opts.pollMs ?? 60_000, AbortSignal.any([signal, nap.signal])).then(
        () => (pending ||= !nap.signal.aborted),
      );
      await Promise.race([new Promise<void>((r) => (wake = r)), closed, stopped, tick]);
      nap.abort();
      wake = undefined;
    }
    if (signal.aborted) {
      await client.logout().catch(() => undefined);
      return;
    }
    throw new Error('imap connection closed');
  }

  /** Stores every mail after the cursor, oldest first, moving the cursor after each. */
  private async catchUp(client: ImapFlow): Promise<void> {
    const mailbox = client.mailbox;
    if (!mailbox) throw new Error('no mailbox open');
    const validity = String(mailbox.uidValidity);
    const raw = getState(this.opts.db, EMAIL_CURSOR_KEY);
    if (raw === undefined) throw new Error('email cursor missing');
    let cursor = JSON.parse(raw) as Cursor;
    let uids: number[];
    if (cursor.validity !== validity) {
      // The server renumbered the mailbox: read again everything since the last stored mail arrived (a
      // day earlier, as SINCE counts whole days); Message-IDs keep what was stored before from doubling.
      this.opts.log.warn({ was: cursor.validity, now: validity }, 'email: UIDVALIDITY changed; rereading');
      const since = new Date(Date.parse(cursor.at) - 86_400_000);
      uids = (await client.search({ since }, { uid: true })) || [];
      cursor = { validity, uid: 0, at: cursor.at };
    } else {
      uids = (await client.search({ uid: `${cursor.uid + 1}:*` }, { uid: true })) || [];
    }
    const last = cursor.uid;
    for (const uid of uids.filter((u) => u > last).sort((a, b) => a - b)) {
      if (this.abort.signal.aborted) return;
      const msg = await client.fetchOne(String(uid), { source: true, internalDate: true }, { uid: true });
      if (msg && msg.source) {
        const received = msg.internalDate instanceof Date ? msg.internalDate : new Date();
        await this.opts.onMail({ source: msg.source, validity, uid, received });
        cursor = { validity, uid, at: received.toISOString() };
      } else {
        cursor = { ...cursor, validity, uid };
      }
      await this.save(cursor);
    }
  }

  /** Moves the cursor, waiting for another process's write lock off the event loop. */
  private async save(cursor: Cursor): Promise<void> {
    await whenWritable(this.opts.db, () => setState(this.opts.db, EMAIL_CURSOR_KEY, JSON.stringify(cursor)));
  }
}

/** imapflow's word for a refused login (as opposed to a server that is down or busy). */
function isLoginRefused(err: unknown): boolean {
  const e = err as { authenticationFailed?: boolean; serverResponseCode?: string };
  return e.authenticationFailed === true && e.serverResponseCode !== 'UNAVAILABLE';
}
