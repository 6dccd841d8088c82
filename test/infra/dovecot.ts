/**
 * A throwaway Dovecot for tests (Debian `dovecot-imapd` and `dovecot-lmtpd`, installed by
 * scripts/setup.d/50-mail.sh): its own config, run and state folders in a temporary folder, IMAP and LMTP on
 * free loopback ports, plaintext logins (no TLS on loopback), mail in Maildirs. Accounts come from a
 * passwd-file; the userdb looks each recipient up there, so LMTP refuses an unknown address (550) and
 * Postfix turns that into a real bounce. Dovecot's auth service also listens on a port, for Postfix's SMTP
 * AUTH (docs/TESTING.md, "Mail").
 *
 * Dovecot's master runs as root (the tests are root, as CI is) and drops to the package's `dovecot` and
 * `dovenull` users; mail is stored as `dovecot`. `restart` stops the master by pid and starts it again on
 * the same ports and mail, as an operator restarting the IMAP server under a running gated would.
 */
import {
  chownSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { freePort, inTempDir, lookupUser, spawnUntilReady, type LocalProcess } from './atproto/proc.js';

/** One mailbox account. */
export interface MailAccount {
  address: string;
  password: string;
}

/** A running Dovecot; `stop` ends it by pid and removes its folder. */
export interface DovecotServer {
  readonly imapPort: number;
  readonly lmtpPort: number;
  /** Where Postfix asks whether a login is right (`smtpd_sasl_path = inet:127.0.0.1:PORT`). */
  readonly authPort: number;
  /** The master's pid now (changes with `restart`). */
  pid(): number;
  /** Stops the master (by pid) and starts it again on the same ports and mail. */
  restart(): Promise<void>;
  /** Stops the master; the IMAP port refuses connections until `start`. */
  halt(): Promise<void>;
  /** Starts a halted master again. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

const DOVECOT = '/usr/sbin/dovecot';

function config(dir: string, ports: { imap: number; lmtp: number; auth: number }): string {
  return `
base_dir = ${dir}/run
state_dir = ${dir}/state
log_path = /dev/stderr
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 1
mail_uid = dovecot
mail_gid = dovecot
mail_location = maildir:~/Maildir
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${dir}/passwd
}
userdb {
  driver = static
  args = uid=dovecot gid=dovecot home=${dir}/mail/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${ports.imap}
  }
  inet_listener imaps {
    port = 0
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = ${ports.lmtp}
  }
}
service auth {
  inet_listener {
    address = 127.0.0.1
    port = ${ports.auth}
  }
}
protocol lmtp {
  postmaster_address = postmaster@example.test
}
`;
}

/** The pids whose parent is `pid`, with their command lines (read from /proc). */
function childrenOf(pid: number): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The parent pid is the second field after the parenthesised command name.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push({ pid: Number(entry), cmd: readFileSync(`/proc/${entry}/cmdline`, 'utf8') });
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

/**
 * Stops `proc` after checking that its pid still runs Dovecot's master (pids are reused), then ends the
 * processes it had started that outlive it: Dovecot's master leaves its `imap` sessions (and its log and
 * stats processes) running when it exits; a real restart of the server drops those connections, and a test
 * must leave nothing behind. Each is checked to be a `dovecot/` process before it is signalled.
 */
async function stopMaster(proc: LocalProcess): Promise<void> {
  const cmdline = `/proc/${proc.pid}/cmdline`;
  const cmd = existsSync(cmdline) ? readFileSync(cmdline, 'utf8') : '';
  if (cmd !== '' && !cmd.includes('dovecot')) throw new Error(`pid ${proc.pid} is not dovecot: ${cmd}`);
  const children = cmd === '' ? [] : childrenOf(proc.pid).filter((c) => c.cmd.startsWith('dovecot/'));
  await proc.stop();
  for (const child of children) {
    try {
      if (readFileSync(`/proc/${child.pid}/cmdline`, 'utf8') === child.cmd)
        process.kill(child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/** Starts Dovecot with `accounts` on free loopback ports. Rejects with Dovecot's own words if it cannot. */
export function startDovecot(accounts: MailAccount[]): Promise<DovecotServer> {
  if (!existsSync(DOVECOT)) throw new Error('dovecot is not installed: run scripts/setup.d/50-mail.sh');
  if (process.getuid?.() !== 0) throw new Error('the mail tests start dovecot as root (CI is root)');
  const user = lookupUser('dovecot');
  if (!user) throw new Error('user dovecot is missing: run scripts/setup.d/50-mail.sh');
  return inTempDir('gated-dovecot-', async (dir) => {
    // Dovecot's auth and mail processes run as `dovecot` and must reach the files below.
    chmodSync(dir, 0o755);
    for (const sub of ['run', 'state', 'mail']) mkdirSync(join(dir, sub));
    chownSync(join(dir, 'mail'), user.uid, user.gid);
    const passwd = join(dir, 'passwd');
    writeFileSync(passwd, accounts.map((a) => `${a.address}:{PLAIN}${a.password}\n`).join(''));
    chownSync(passwd, 0, user.gid);
    chmodSync(passwd, 0o640);
    const ports = { imap: await freePort(), lmtp: await freePort(), auth: await freePort() };
    const conf = join(dir, 'dovecot.conf');
    writeFileSync(conf, config(dir, ports));
    const launch = () =>
      spawnUntilReady('dovecot', DOVECOT, ['-c', conf, '-F'], /starting up/, {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      });
    let proc: LocalProcess | undefined = await launch();
    const halt = async () => {
      if (proc) await stopMaster(proc);
      proc = undefined;
    };
    const start = async () => {
      proc ??= await launch();
    };
    return {
      imapPort: ports.imap,
      lmtpPort: ports.lmtp,
      authPort: ports.auth,
      pid: () => proc?.pid ?? 0,
      halt,
      start,
      async restart() {
        await halt();
        await start();
      },
      stop: halt,
    };
  });
}
