/**
 * A small DNS server on 127.0.0.1 for tests, speaking the real protocol over UDP (packets encoded and decoded
 * with dns-packet): it answers TXT questions from a table a test fills (DKIM keys at
 * `<selector>._domainkey.<domain>`, DMARC policies at `_dmarc.<domain>`) and NXDOMAIN for every other name.
 * gated's mail checks ask it through EMAIL_DNS_SERVERS, as they would ask a real resolver. It counts the
 * questions it was asked, so a test can tell that a check was (or was not) made.
 */
import { createSocket, type RemoteInfo } from 'node:dgram';
import { generateKeyPairSync } from 'node:crypto';
import dnsPacket from 'dns-packet';

/** A running DNS server. */
export interface DnsServer {
  /** `127.0.0.1:<port>`, what EMAIL_DNS_SERVERS takes. */
  readonly address: string;
  /** Serves `text` as the TXT record of `name` (split into 255-byte strings as DNS requires). */
  txt(name: string, text: string): void;
  /** The names asked about so far, lower case, in order. */
  readonly asked: string[];
  stop(): Promise<void>;
}

/** Starts the server on a free loopback port. */
export async function startDns(): Promise<DnsServer> {
  const records = new Map<string, string[]>();
  const asked: string[] = [];
  const socket = createSocket('udp4');
  socket.on('message', (buf: Buffer, from: RemoteInfo) => {
    let query;
    try {
      query = dnsPacket.decode(buf);
    } catch {
      return; // Not a DNS packet: a real server drops it too.
    }
    const q = query.questions?.[0];
    if (!q) return;
    const name = q.name.toLowerCase();
    asked.push(name);
    const txt = q.type === 'TXT' ? records.get(name) : undefined;
    const answer = dnsPacket.encode({
      id: query.id,
      type: 'response',
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (txt ? 0 : 3), // 3: NXDOMAIN
      questions: [q],
      answers: (txt ?? []).map((text) => ({
        type: 'TXT',
        name: q.name,
        ttl: 60,
        class: 'IN',
        data: chunks(text),
      })),
    });
    socket.send(answer, from.port, from.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => resolve());
  });
  const port = socket.address().port;
  return {
    address: `127.0.0.1:${port}`,
    asked,
    txt(name, text) {
      const key = name.toLowerCase();
      records.set(key, [...(records.get(key) ?? []), text]);
    },
    stop: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** A TXT record's text as DNS character-strings of at most 255 bytes. */
function chunks(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += 255) out.push(text.slice(i, i + 255));
  return out;
}

/** A DKIM key pair: the private key in PEM for signing, the TXT record that publishes the public key. */
export function dkimKey(): { privateKey: string; record: string } {
  // 1024 bits (mailauth's minimum) keeps the answer within one 512-byte UDP packet.
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  const der = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    record: `v=DKIM1; k=rsa; p=${der}`,
  };
}
