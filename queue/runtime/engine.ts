import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';

/**
 * Where the Docker engine is and how to reach it, the way the docker CLI reads it: DOCKER_HOST
 * (`unix:///path`, `tcp://host:port`), DOCKER_TLS_VERIFY=1 for mutual TLS, DOCKER_CERT_PATH holding ca.pem,
 * cert.pem and key.pem. A remote engine (or a swarm manager) serves as well as the local socket.
 */
export interface EngineAddress {
  host: string | undefined;
  tlsVerify: boolean;
  certPath: string | undefined;
}

/** Why the engine cannot be used: the operator's to fix, said in one line. */
export type EngineProblem =
  'address' | 'certificates' | 'tls' | 'unreachable' | 'image_missing' | 'not_swarm';

/** The engine refused or cannot be reached; `problem` says which, the message says what to do. */
export class EngineError extends Error {
  override readonly name = 'EngineError';
  constructor(
    readonly problem: EngineProblem,
    message: string,
  ) {
    super(message);
  }
}

/**
 * dockerode options for `address`; undefined leaves dockerode's defaults (the local socket). Reads the
 * certificate files at once, so a missing one fails the start with its name instead of the first run.
 */
export function engineOptions(address: EngineAddress): Docker.DockerOptions | undefined {
  const { host } = address;
  if (!host) return undefined;
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) };
  if (!/^(tcp|https?):\/\//.test(host)) {
    throw new EngineError('address', `DOCKER_HOST must be unix:///path or tcp://host:port, got '${host}'`);
  }
  const url = new URL(host.replace(/^tcp:/, 'http:'));
  const tls = address.tlsVerify || url.protocol === 'https:' || url.port === '2376';
  const port = Number(url.port || (tls ? 2376 : 2375));
  if (!tls) return { host: url.hostname, port, protocol: 'http' };
  if (!address.certPath) {
    throw new EngineError('certificates', 'DOCKER_TLS_VERIFY is set but DOCKER_CERT_PATH is not');
  }
  const read = (name: string) => {
    const file = join(address.certPath!, name);
    try {
      return readFileSync(file);
    } catch (err) {
      throw new EngineError('certificates', `cannot read ${file}: ${(err as NodeJS.ErrnoException).code}`);
    }
  };
  return {
    host: url.hostname,
    port,
    protocol: 'https',
    ca: read('ca.pem'),
    cert: read('cert.pem'),
    key: read('key.pem'),
  };
}

/** The address in words for logs and errors (never a credential: certificates are files). */
export function describeAddress(address: EngineAddress): string {
  if (!address.host) return 'the local engine (/var/run/docker.sock)';
  return address.tlsVerify ? `${address.host} (mutual TLS)` : address.host;
}

/** Sorts a failed engine call into an EngineError: TLS handshakes, refused connections, the rest. */
export function engineError(err: unknown, where: string): EngineError {
  if (err instanceof EngineError) return err;
  const e = err as NodeJS.ErrnoException & { reason?: string };
  const code = e?.code ?? '';
  const msg = e?.message ?? String(err);
  if (code.startsWith('ERR_SSL') || code.startsWith('ERR_TLS') || /certificate|ssl|tls/i.test(msg)) {
    return new EngineError(
      'tls',
      `the engine at ${where} refused the TLS handshake (${code || msg}): check DOCKER_CERT_PATH`,
    );
  }
  if (['ECONNREFUSED', 'ENOENT', 'EHOSTUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EPIPE'].includes(code)) {
    return new EngineError('unreachable', `the engine at ${where} cannot be reached (${code})`);
  }
  return new EngineError('unreachable', `the engine at ${where} failed: ${msg}`);
}

// Errors of the connection itself, as Node names them: the engine is not there (or not any more).
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EPIPE',
]);

/**
 * An EngineError('unreachable') when `err` says the engine could not be reached at all (a refused or reset
 * connection, a socket file with nobody behind it), else undefined: an answer the engine gave (404, 409, a
 * bad request) is not an outage. The queue retries runs that end this way without counting them against
 * their messages.
 */
export function unreachableError(err: unknown, where: string): EngineError | undefined {
  if (err instanceof EngineError) return err.problem === 'unreachable' ? err : undefined;
  const e = err as (NodeJS.ErrnoException & { statusCode?: number }) | undefined;
  if (!e || typeof e !== 'object' || e.statusCode !== undefined) return undefined;
  const code = e.code ?? '';
  if (CONNECTION_CODES.has(code) || (code === 'ENOENT' && e.syscall === 'connect')) {
    return new EngineError('unreachable', `the engine at ${where} cannot be reached (${code})`);
  }
  return undefined;
}

/**
 * Checks that the engine answers and holds `images` (none can be pulled on a registry-less host, and a
 * remote engine has only what was built or loaded there). Rejects with an EngineError naming the problem.
 */
export async function checkEngine(docker: Docker, where: string, images: readonly string[]): Promise<void> {
  try {
    await docker.ping();
  } catch (err) {
    throw engineError(err, where);
  }
  for (const image of new Set(images)) {
    try {
      await docker.getImage(image).inspect();
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) {
        throw new EngineError(
          'image_missing',
          `image ${image} is not on the engine at ${where}: build or load it there`,
        );
      }
      throw engineError(err, where);
    }
  }
}

/**
 * The engine of each swarm node, for attaching to the tasks it runs: `tcp://<node address>:<port>` with the
 * manager's TLS settings, one client per node, made on first use. Without a port every task is attached
 * through the manager (a single-node swarm).
 */
export function nodeEngines(
  manager: Docker,
  DockerClass: new (opts?: Docker.DockerOptions) => Docker,
  address: EngineAddress,
  port: number | undefined,
): ((nodeId: string) => Promise<Docker>) | undefined {
  if (port === undefined) return undefined;
  const clients = new Map<string, Docker>();
  return async (nodeId) => {
    const known = clients.get(nodeId);
    if (known) return known;
    const node = (await manager.getNode(nodeId).inspect()) as { Status?: { Addr?: string } };
    const addr = node.Status?.Addr;
    if (!addr) throw new EngineError('unreachable', `swarm node ${nodeId} has no address`);
    const client = new DockerClass(engineOptions({ ...address, host: `tcp://${addr}:${port}` }));
    clients.set(nodeId, client);
    return client;
  };
}
