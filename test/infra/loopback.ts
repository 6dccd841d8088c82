import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** An HTTP server listening on 127.0.0.1 that a test can stop completely. */
export interface Loopback {
  port: number;
  /** Cuts every open connection (held long polls, keep-alive sockets) and stops listening. */
  close(): Promise<void>;
}

/** Starts `server` on a free loopback port, tracking its sockets so `close()` leaves nothing open. */
export async function listenLoopback(server: Server): Promise<Loopback> {
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      })),
  };
}
