import { Resolver } from 'node:dns/promises';
import { dkimVerify, dmarc, type DNSResolver } from 'mailauth';
import { coerceError } from '../../core/errors.js';

/**
 * Who sent a mail (docs/CHANNELS.md, "Email", "Who sent it"). `From:` is whatever the writer typed, so a mail
 * counts as its address only when the address is authenticated:
 * - by a receiving server gated is told to believe (EMAIL_AUTHSERV_IDS): the first `Authentication-Results`
 *   header carrying one of those authserv-ids decides, with `dmarc=pass` for the From domain or a `dkim=pass`
 *   whose signing domain is the From domain or a parent of it (RFC 8601; the server must remove such headers
 *   from incoming mail, as receiving servers that write them do);
 * - otherwise by gated itself, with mailauth: a DKIM signature that verifies and is aligned with the From
 *   domain, under the domain's DMARC policy when it publishes one (strict alignment included). SPF is not
 *   checked here: it needs the address the mail came from, which only the receiving server saw; a trusted
 *   server's results carry it.
 * The verdict is stored on the row (`messages.sender_auth`): `pass: <how>` or `fail: <why>`.
 */

/** What the verdict is made from. */
export interface MailAuthOptions {
  /** Authserv-ids (lower case) whose Authentication-Results are believed. */
  authservIds: readonly string[];
  /** Where gated's own checks ask for DKIM keys and DMARC records (tests serve them locally). */
  resolver: DNSResolver;
}

/** A DNS resolver for mailauth: the given servers (`host` or `host:port`), or the system's. */
export function mailResolver(servers: readonly string[]): DNSResolver {
  // A lookup that does not answer must not hold the mailbox long: two tries of 2 s per record.
  const r = new Resolver({ timeout: 2000, tries: 2 });
  if (servers.length > 0) r.setServers([...servers]);
  return (name, rrtype) => r.resolve(name, rrtype) as Promise<string[][] | string[]>;
}

/** The header block of a mail, unfolded, one `[name, value]` per header in order (top first). */
export function headerFields(source: Buffer): Array<[string, string]> {
  // Headers end at the first empty line; the block is read no further than 256 KiB.
  const head = source.subarray(0, 256 * 1024).toString('latin1');
  const end = head.search(/\r?\n\r?\n/);
  const lines = (end < 0 ? head : head.slice(0, end)).split(/\r?\n/);
  const out: Array<[string, string]> = [];
  for (const line of lines) {
    if (/^[ \t]/.test(line) && out.length > 0) out[out.length - 1]![1] += ' ' + line.trim();
    else {
      const colon = line.indexOf(':');
      if (colon > 0) out.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
    }
  }
  return out;
}

/** One result of an Authentication-Results header: `dkim=pass header.d=example.test` as parts. */
export interface AuthResult {
  method: string;
  result: string;
  props: Record<string, string>;
}

/** An Authentication-Results value parsed: its authserv-id and results (comments dropped). */
export function parseAuthResults(value: string): { authservId: string; results: AuthResult[] } {
  let text = value;
  // Comments may nest; strip the innermost until none is left.
  for (let prev = ''; prev !== text;) [prev, text] = [text, text.replace(/\([^()]*\)/g, ' ')];
  // `;` separates results except inside a quoted value.
  const [idPart = '', ...rest] = text.match(/(?:"(?:[^"\\]|\\.)*"|[^;"])+/g) ?? [];
  const authservId = (idPart.trim().split(/\s+/)[0] ?? '').toLowerCase();
  const results: AuthResult[] = [];
  for (const part of rest) {
    const pairs = [...part.matchAll(/([\w./-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)/g)];
    const first = pairs[0];
    if (!first) continue;
    const props: Record<string, string> = {};
    for (const [, k, v] of pairs.slice(1)) props[k!.toLowerCase()] = v!.replace(/^"|"$/g, '').toLowerCase();
    results.push({ method: first[1]!.split('/')[0]!.toLowerCase(), result: first[2]!.toLowerCase(), props });
  }
  return { authservId, results };
}

/** True when a signing domain `d` is the From domain or a parent of it (never a bare top-level name). */
function alignedWith(fromDomain: string, d: string): boolean {
  return d.includes('.') && (fromDomain === d || fromDomain.endsWith(`.${d}`));
}

/** The verdict of a trusted server's results for `fromDomain`. */
function verdictOfResults(id: string, results: AuthResult[], fromDomain: string): string {
  const dmarcPass = results.find(
    (r) => r.method === 'dmarc' && r.result === 'pass' && r.props['header.from'] === fromDomain,
  );
  if (dmarcPass) return `pass: ${id} says dmarc=pass header.from=${fromDomain}`;
  const dkimPass = results.find((r) => {
    const d = r.props['header.d'] ?? r.props['header.i']?.split('@').pop() ?? '';
    return r.method === 'dkim' && r.result === 'pass' && alignedWith(fromDomain, d);
  });
  if (dkimPass) return `pass: ${id} says dkim=pass header.d=${dkimPass.props['header.d'] ?? fromDomain}`;
  const said = results.map((r) => `${r.method}=${r.result}`).join(' ') || 'nothing';
  return `fail: ${id} says ${said} for ${fromDomain}`;
}

/**
 * The verdict on `from` (the mail's first From address, lower case) for the raw mail `source`: `pass: …`
 * or `fail: …`. Never throws: a check that cannot be made (DNS down) is a `fail` saying so.
 */
export async function authenticateSender(
  source: Buffer,
  from: string,
  opts: MailAuthOptions,
): Promise<string> {
  const fromDomain = from.slice(from.lastIndexOf('@') + 1).toLowerCase();
  const fields = headerFields(source);
  if (fields.filter(([n]) => n === 'from').length !== 1) return 'fail: not exactly one From header';
  if (opts.authservIds.length > 0) {
    for (const [name, value] of fields) {
      if (name !== 'authentication-results') continue;
      const parsed = parseAuthResults(value);
      if (opts.authservIds.includes(parsed.authservId))
        return verdictOfResults(parsed.authservId, parsed.results, fromDomain);
    }
  }
  try {
    return await verifyItself(source, from, fromDomain, opts.resolver);
  } catch (err) {
    return `fail: could not check (${coerceError(err).message})`;
  }
}

/** gated's own check: an aligned DKIM signature, under the domain's DMARC policy when it has one. */
async function verifyItself(
  source: Buffer,
  from: string,
  fromDomain: string,
  resolver: DNSResolver,
): Promise<string> {
  const dkim = await dkimVerify(source, { resolver });
  const headerFrom = dkim.headerFrom.map((a) => a.toLowerCase());
  if (headerFrom.length !== 1 || headerFrom[0] !== from) return 'fail: From is not one address';
  const passed = dkim.results.filter((r) => r.status.result === 'pass');
  const policy = await dmarc({
    headerFrom: from,
    spfDomains: [],
    dkimDomains: passed.map((r) => ({
      id: r.id,
      domain: r.signingDomain,
      aligned: r.status.aligned,
      underSized: r.status.underSized,
    })),
    resolver,
  });
  const signed = passed.map((r) => r.signingDomain).join(',');
  const dkimSaid = signed
    ? `dkim=pass header.d=${signed}`
    : `dkim=${dkim.results[0]?.status.result ?? 'none'}`;
  const dmarcSaid = policy ? policy.status.result : 'none';
  if (dmarcSaid === 'pass') return `pass: ${dkimSaid} dmarc=pass`;
  if (dmarcSaid === 'none' && passed.some((r) => alignedWith(fromDomain, r.signingDomain.toLowerCase())))
    return `pass: ${dkimSaid} (aligned; no DMARC policy)`;
  return `fail: ${dkimSaid} dmarc=${dmarcSaid} for ${fromDomain}`;
}
