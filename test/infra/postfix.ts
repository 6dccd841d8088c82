/**
 * A throwaway Postfix for tests (Debian `postfix`, installed by scripts/setup.d/50-mail.sh): its own
 * config directory, queue and data folders in a temporary folder, SMTP on a free loopback port, every
 * domain of the test (`example.test`) delivered over LMTP into a Dovecot (test/infra/dovecot.ts). Logins
 * are checked by that Dovecot (SMTP AUTH), so a wrong password is refused as on a real provider; mail to an
 * address Dovecot does not know comes back as a real bounce from MAILER-DAEMON.
 *
 * Faults: Postfix asks a policy service (a small server here, speaking Postfix's policy delegation
 * protocol) about every recipient; `failNext` makes it answer the next sends with a temporary (451) or
 * permanent (554) refusal, which is what the SMTP client then sees from the real Postfix.
 *
 * The master runs as root in the foreground (`master -d`) and its daemons as the package's `postfix` user,
 * without chroot. It logs into `postfix.log` of its folder. `stop` ends it by pid (checked first); the daemons it
 * started end with it.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { freePort, inTempDir, lookupUser, type LocalProcess } from './atproto/proc.js';
import type { DovecotServer } from './dovecot.js';

/** A refusal the policy service can make Postfix answer with. */
export type SmtpFault = 'temporary' | 'permanent';

/** A running Postfix; `stop` ends it and its policy service and removes its folder. */
export interface PostfixServer {
  readonly smtpPort: number;
  readonly pid: number;
  /** The queue folder: empty of mail (maildrop, incoming, active, deferred) once all was delivered. */
  readonly queueDir: string;
  /** The next `n` recipients sent by `sender` are refused with `fault`. */
  failNext(fault: SmtpFault, n: number, sender: string): void;
  stop(): Promise<void>;
}

const MASTER = '/usr/lib/postfix/sbin/master';

const MASTER_CF = [
  // service type private unpriv chroot wakeup maxproc command
  'pickup    unix  n  -  n  60    1  pickup',
  'cleanup   unix  n  -  n  -     0  cleanup',
  'qmgr      unix  n  -  n  300   1  qmgr',
  'rewrite   unix  -  -  n  -     -  trivial-rewrite',
  'bounce    unix  -  -  n  -     0  bounce',
  'defer     unix  -  -  n  -     0  bounce',
  'trace     unix  -  -  n  -     0  bounce',
  'verify    unix  -  -  n  -     1  verify',
  'flush     unix  n  -  n  1000? 0  flush',
  'proxymap  unix  -  -  n  -     -  proxymap',
  'smtp      unix  -  -  n  -     -  smtp',
  'relay     unix  -  -  n  -     -  smtp',
  'showq     unix  n  -  n  -     -  showq',
  'error     unix  -  -  n  -     -  error',
  'retry     unix  -  -  n  -     -  error',
  'discard   unix  -  -  n  -     -  discard',
  'lmtp      unix  -  -  n  -     -  lmtp',
  'anvil     unix  -  -  n  -     1  anvil',
  'scache    unix  -  -  n  -     1  scache',
  'postlog   unix-dgram n - n -   1  postlogd',
];

function mainCf(dir: string, dovecot: DovecotServer, policyPort: number): string {
  return `
compatibility_level = 3.6
queue_directory = ${dir}/spool
data_directory = ${dir}/data
mail_owner = postfix
setgid_group = postdrop
myhostname = mail.example.test
mydomain = example.test
myorigin = example.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
virtual_mailbox_domains = example.test
virtual_transport = lmtp:inet:127.0.0.1:${dovecot.lmtpPort}
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = dovecot
smtpd_sasl_path = inet:127.0.0.1:${dovecot.authPort}
smtpd_recipient_restrictions = check_policy_service inet:127.0.0.1:${policyPort}, permit_mynetworks, reject_unauth_destination
alias_maps =
alias_database =
biff = no
smtputf8_enable = no
maillog_file = ${dir}/postfix.log
maillog_file_prefixes = ${dir}
# One delivery at a time, in the order Postfix accepted them: a split reply arrives part after part.
lmtp_destination_concurrency_limit = 1
# Mail held while Dovecot is down is tried again within a few seconds, not minutes.
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
`;
}

/** The policy delegation server: DUNNO, or the next scripted refusal for the sender it is meant for. */
function policyServer() {
  const faults: { fault: SmtpFault; sender: string }[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buf = '';
    socket.on('data', (chunk) => {
      buf += chunk.toString();
      for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
        const attrs = new Map(
          buf
            .slice(0, end)
            .split('\n')
            .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const),
        );
        buf = buf.slice(end + 2);
        const i = faults.findIndex((f) => f.sender === attrs.get('sender'));
        const fault = i >= 0 ? faults.splice(i, 1)[0]!.fault : undefined;
        const action =
          fault === 'temporary'
            ? '451 4.3.0 Temporary failure, try again later'
            : fault === 'permanent'
              ? '554 5.7.1 Recipient refused by policy'
              : 'DUNNO';
        socket.write(`action=${action}\n\n`);
      }
    });
  });
  return {
    faults,
    async listen(port: number) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', resolve);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * The queue's folders with the owners and modes `postfix check` would give them (that script takes seconds
 * of postconf calls on a loaded machine; these dozen folders take none).
 */
function makeQueue(spool: string, user: { uid: number; gid: number }): void {
  const postdrop = lookupGroup('postdrop');
  if (postdrop === undefined) throw new Error('group postdrop is missing: run scripts/setup.d/50-mail.sh');
  const queues = ['active', 'bounce', 'corrupt', 'defer', 'deferred', 'flush', 'hold', 'incoming'];
  for (const q of [...queues, 'private', 'saved', 'trace']) {
    mkdirSync(join(spool, q), { mode: 0o700 });
    chownSync(join(spool, q), user.uid, 0);
  }
  mkdirSync(join(spool, 'pid'), { mode: 0o755 });
  for (const [q, mode] of [
    ['public', 0o710],
    ['maildrop', 0o730],
  ] as const) {
    mkdirSync(join(spool, q));
    chmodSync(join(spool, q), mode);
    chownSync(join(spool, q), user.uid, postdrop);
  }
}

/** The gid of a local group, or undefined. */
function lookupGroup(name: string): number | undefined {
  for (const line of readFileSync('/etc/group', 'utf8').split('\n')) {
    const [group, , gid] = line.split(':');
    if (group === name && gid) return Number(gid);
  }
  return undefined;
}

/**
 * Starts the master in the foreground and resolves once its SMTP port greets with 220. Rejects, with what it printed, when it
 * exits first or does not greet within 30 s.
 */
async function spawnMaster(dir: string, etc: string, smtpPort: number): Promise<LocalProcess> {
  const child = spawn(MASTER, ['-c', etc, '-d'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', MAIL_CONFIG: etc },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-4000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 30_000;
  while (!(await greets(smtpPort))) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`postfix did not start (exit ${child.exitCode ?? child.signalCode}):\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  let stopping: Promise<void> | undefined;
  return {
    pid: child.pid!,
    stop: () =>
      (stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(killer);
      })()),
  };
}

/** True when 127.0.0.1:`port` answers with an SMTP greeting. */
function greets(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('data', (d) => done(d.toString().startsWith('220')));
    socket.once('error', () => done(false));
  });
}

/** Starts Postfix delivering `example.test` into `dovecot`. Rejects with Postfix's own words if it cannot. */
export function startPostfix(dovecot: DovecotServer): Promise<PostfixServer> {
  if (!existsSync(MASTER)) throw new Error('postfix is not installed: run scripts/setup.d/50-mail.sh');
  if (process.getuid?.() !== 0) throw new Error('the mail tests start postfix as root (CI is root)');
  const user = lookupUser('postfix');
  if (!user) throw new Error('user postfix is missing: run scripts/setup.d/50-mail.sh');
  return inTempDir('gated-postfix-', async (dir) => {
    // Postfix's daemons run as `postfix` and change into the queue below this folder.
    chmodSync(dir, 0o755);
    const etc = join(dir, 'etc');
    for (const sub of ['etc', 'spool', 'data']) mkdirSync(join(dir, sub));
    chownSync(join(dir, 'data'), user.uid, user.gid);
    const policy = policyServer();
    const policyPort = await freePort();
    await policy.listen(policyPort);
    let proc: LocalProcess | undefined;
    try {
      const smtpPort = await freePort();
      writeFileSync(join(etc, 'main.cf'), mainCf(dir, dovecot, policyPort));
      const service = `127.0.0.1:${smtpPort} inet n - n - - smtpd`;
      writeFileSync(join(etc, 'master.cf'), [service, ...MASTER_CF, ''].join('\n'));
      makeQueue(join(dir, 'spool'), user);
      proc = await spawnMaster(dir, etc, smtpPort);
      const master = proc;
      return {
        smtpPort,
        pid: master.pid,
        queueDir: join(dir, 'spool'),
        failNext(fault, n, sender) {
          for (let i = 0; i < n; i += 1) policy.faults.push({ fault, sender });
        },
        async stop() {
          const cmdline = `/proc/${master.pid}/cmdline`;
          const cmd = existsSync(cmdline) ? readFileSync(cmdline, 'utf8') : '';
          if (cmd !== '' && !cmd.includes('master'))
            throw new Error(`pid ${master.pid} is not postfix's master: ${cmd}`);
          await master.stop();
          await policy.close();
        },
      };
    } catch (err) {
      await proc?.stop();
      await policy.close();
      throw err;
    }
  });
}
