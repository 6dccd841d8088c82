import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';

/**
 * Attaches to a container's stdin/stdout/stderr as a raw, hijacked connection with an EMPTY request body.
 *
 * Why not `container.attach()`: dockerode sends its options as a JSON body. dockerd drops those bytes, but
 * podman forwards them into the container's stdin, where they would become the agent's first "line"
 * (docs/TESTING.md). docker-modem's own dial cannot send an empty body either: with nothing to write it never
 * flushes the request headers and the upgrade never happens. So the upgrade request is made here, with
 * `Content-Length: 0`, on the same endpoint (unix socket, http or https with the modem's TLS material) the
 * dockerode client uses, DOCKER_HOST included.
 */

interface ModemInternals {
  socketPath?: string | (() => Promise<string> | string);
  host?: string;
  port?: number | string;
  protocol?: string;
  version?: string;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  headers?: Record<string, string>;
}

/**
 * Opens the attach stream of container `id`; resolves with the upgraded socket. With `logs`, the stream
 * starts with what the container wrote before the attach (a swarm task is attached after it started).
 */
export async function attachRaw(docker: Docker, id: string, opts: { logs?: boolean } = {}): Promise<Duplex> {
  const modem = docker.modem as unknown as ModemInternals;
  const query = `stream=1&stdin=1&stdout=1&stderr=1${opts.logs ? '&logs=1' : ''}`;
  const path = `${modem.version ? '/' + modem.version : ''}/containers/${encodeURIComponent(id)}/attach?${query}`;
  const headers = { ...modem.headers, Connection: 'Upgrade', Upgrade: 'tcp', 'Content-Length': '0' };
  let request: http.ClientRequest;
  if (modem.socketPath) {
    const socketPath = typeof modem.socketPath === 'function' ? await modem.socketPath() : modem.socketPath;
    request = http.request({ socketPath, path, method: 'POST', headers });
  } else if (modem.protocol === 'http' || modem.protocol === 'https') {
    const lib = modem.protocol === 'https' ? https : http;
    request = lib.request({
      host: modem.host,
      port: modem.port,
      path,
      method: 'POST',
      headers,
      ...(modem.protocol === 'https' ? { ca: modem.ca, cert: modem.cert, key: modem.key } : {}),
    });
  } else {
    throw new Error(`docker runtime: attaching over ${modem.protocol ?? 'this'} transport is not supported`);
  }
  return new Promise<Duplex>((resolve, reject) => {
    request.once('upgrade', (_res, socket, head) => {
      if (head.length > 0) socket.unshift(head);
      resolve(socket);
    });
    request.once('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c.slice(0, 500)));
      res.on('end', () =>
        reject(new Error(`attach to ${id.slice(0, 12)} refused (${res.statusCode}): ${body.trim()}`)),
      );
    });
    request.once('error', reject);
    request.end();
  });
}
