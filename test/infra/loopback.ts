import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** An HTTP server listening on 127.0.0.1 that a test can stop completely. */
export interface Loopback {
  port: number;
  /** Cuts every open connection (held long polls, keep-alive sockets) and stops listening. */
  close(): Promise<void>;
}

/**
 * Starts `server` on a free loopback port (or on `port`, one a test handed gated before the server was up),
 * tracking its sockets so `close()` leaves nothing open.
 */
export async function listenLoopback(server: Server, port = 0): Promise<Loopback> {
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const bound = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    port: bound,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      })),
  };
}
