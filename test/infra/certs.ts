/**
 * Certificates for a Docker engine over mutual TLS, made with openssl for one test: a CA, a server
 * certificate for 127.0.0.1/localhost, a client certificate the CA signed, and a client certificate from
 * another CA (the wrong one). Client folders hold ca.pem, cert.pem and key.pem, as DOCKER_CERT_PATH does.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Paths of the made files. */
export interface TestCerts {
  ca: string;
  serverCert: string;
  serverKey: string;
  /** DOCKER_CERT_PATH of a client the engine accepts. */
  clientDir: string;
  /** DOCKER_CERT_PATH of a client whose certificate another CA signed. */
  wrongClientDir: string;
}

async function openssl(dir: string, ...args: string[]): Promise<void> {
  try {
    await run('openssl', args, { cwd: dir });
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`openssl ${args[0]} failed: ${e.stderr ?? e.message}`);
  }
}

async function makeCa(dir: string, name: string): Promise<void> {
  await openssl(
    dir,
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}-key.pem`,
    '-out',
    `${name}.pem`,
  );
}

async function signed(dir: string, ca: string, name: string, ext: string): Promise<void> {
  writeFileSync(join(dir, `${name}.ext`), ext);
  await openssl(
    dir,
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}-key.pem`,
    '-out',
    `${name}.csr`,
  );
  await openssl(
    dir,
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}-key.pem`,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  );
}

function clientFolder(dir: string, folder: string, ca: string, client: string): string {
  const out = join(dir, folder);
  mkdirSync(out, { recursive: true });
  copyFileSync(join(dir, `${ca}.pem`), join(out, 'ca.pem'));
  copyFileSync(join(dir, `${client}.pem`), join(out, 'cert.pem'));
  copyFileSync(join(dir, `${client}-key.pem`), join(out, 'key.pem'));
  return out;
}

/** Makes the certificates in `dir`. */
export async function makeTestCerts(dir: string): Promise<TestCerts> {
  mkdirSync(dir, { recursive: true });
  await makeCa(dir, 'ca');
  await makeCa(dir, 'other-ca');
  await signed(
    dir,
    'ca',
    'server',
    'subjectAltName = DNS:localhost,IP:127.0.0.1\nextendedKeyUsage = serverAuth\n',
  );
  await signed(dir, 'ca', 'client', 'extendedKeyUsage = clientAuth\n');
  await signed(dir, 'other-ca', 'stranger', 'extendedKeyUsage = clientAuth\n');
  return {
    ca: join(dir, 'ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server-key.pem'),
    clientDir: clientFolder(dir, 'client', 'ca', 'client'),
    wrongClientDir: clientFolder(dir, 'wrong-client', 'ca', 'stranger'),
  };
}
