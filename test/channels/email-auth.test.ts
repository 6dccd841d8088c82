/**
 * The verdict on a mail's From (channels/email/auth.ts) for mails signed here with mailauth's DKIM signer,
 * keys and DMARC policies served by a resolver that reads a table (as the local DNS server of
 * test/infra/dns.ts does for the whole gated): aligned signatures pass, forged, tampered, foreign-signed
 * and doubled-From mails fail, and only a trusted authserv-id's Authentication-Results are believed.
 */
import { dkimSign, type DNSResolver } from 'mailauth';
import { describe, expect, it } from 'vitest';
import { authenticateSender, parseAuthResults } from '../../channels/email/auth.js';
import { dkimKey } from '../infra/dns.js';

const example = dkimKey();
const evil = dkimKey();

/** A resolver over a table of TXT records; any other name is ENOTFOUND, as from a real server. */
function resolver(records: Record<string, string>): DNSResolver {
  return async (name, rrtype) => {
    const text = rrtype === 'TXT' ? records[name.toLowerCase()] : undefined;
    if (text === undefined)
      throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return [[text]];
  };
}

const DNS = resolver({
  'mail._domainkey.example.test': example.record,
  '_dmarc.example.test': 'v=DMARC1; p=reject',
  'mail._domainkey.evil.test': evil.record,
  'mail._domainkey.nodmarc.test': example.record,
});

function mail(from: string, body = 'hello', extra: string[] = []): Buffer {
  return Buffer.from(
    [
      ...extra,
      `From: ${from}`,
      'To: bot@example.test',
      'Subject: hi',
      'Message-ID: <1@example.test>',
      'Date: Mon, 23 Nov 2026 10:00:00 +0000',
      '',
      body,
      '',
    ].join('\r\n'),
  );
}

async function signed(source: Buffer, domain: string, key = example.privateKey): Promise<Buffer> {
  // mailauth signs with each entry of signatureData (its type file lists the entry's fields at the top).
  const sign = { signingDomain: domain, selector: 'mail', privateKey: key };
  // The time is given: without it mailauth (4.13) reads the clock for the header's t= twice, once for the
  // header it signs and once for the header it writes (each rounded to the second), and when the two reads
  // fall on both sides of a half second (the RSA sign lies between them, slow on a loaded machine) the
  // signature does not verify.
  const signTime = new Date();
  const { signatures, errors } = await dkimSign(source, { ...sign, signTime, signatureData: [sign] });
  if (errors.length > 0 || signatures.trim() === '') throw new Error(`not signed: ${String(errors[0])}`);
  return Buffer.concat([Buffer.from(signatures), source]);
}

const own = { authservIds: [] as string[], resolver: DNS };

describe('authenticateSender: gated checks itself', () => {
  it('passes a DKIM signature aligned with From under the DMARC policy', async () => {
    const verdict = await authenticateSender(
      await signed(mail('alice@example.test'), 'example.test'),
      'alice@example.test',
      own,
    );
    expect(verdict).toBe('pass: dkim=pass header.d=example.test dmarc=pass');
  });

  it('fails an unsigned mail, a tampered one and one signed by another domain', async () => {
    expect(await authenticateSender(mail('alice@example.test'), 'alice@example.test', own)).toBe(
      'fail: dkim=none dmarc=fail for example.test',
    );
    const good = await signed(mail('alice@example.test'), 'example.test');
    const tampered = Buffer.from(good.toString().replace('hello', '/approve K7QXM2HP'));
    expect(await authenticateSender(tampered, 'alice@example.test', own)).toMatch(
      /^fail: dkim=neutral dmarc=fail/,
    );
    const foreign = await signed(mail('alice@example.test'), 'evil.test', evil.privateKey);
    expect(await authenticateSender(foreign, 'alice@example.test', own)).toBe(
      'fail: dkim=pass header.d=evil.test dmarc=fail for example.test',
    );
  });

  it('without a DMARC policy, passes only a signature of the From domain or a parent of it', async () => {
    const own1 = await signed(mail('bob@nodmarc.test'), 'nodmarc.test');
    expect(await authenticateSender(own1, 'bob@nodmarc.test', own)).toBe(
      'pass: dkim=pass header.d=nodmarc.test (aligned; no DMARC policy)',
    );
    const other = await signed(mail('bob@nodmarc.test'), 'evil.test', evil.privateKey);
    expect(await authenticateSender(other, 'bob@nodmarc.test', own)).toBe(
      'fail: dkim=pass header.d=evil.test dmarc=none for nodmarc.test',
    );
  });

  it('fails a mail with two From headers, whichever one a reader shows', async () => {
    const two = await signed(mail('alice@example.test', 'hi', ['From: mallory@evil.test']), 'example.test');
    expect(await authenticateSender(two, 'alice@example.test', own)).toBe(
      'fail: not exactly one From header',
    );
  });

  it('fails, saying so, when the keys cannot be looked up', async () => {
    const down: DNSResolver = async () => {
      throw Object.assign(new Error('queryTxt ETIMEOUT'), { code: 'ETIMEOUT' });
    };
    const verdict = await authenticateSender(
      await signed(mail('alice@example.test'), 'example.test'),
      'alice@example.test',
      {
        authservIds: [],
        resolver: down,
      },
    );
    expect(verdict).toMatch(/^fail: /);
  });
});

describe('authenticateSender: a trusted receiving server', () => {
  const trust = { authservIds: ['mx.trusted.test'], resolver: DNS };
  const ar = (value: string) => `Authentication-Results: ${value}`;

  it("believes the first Authentication-Results of a trusted authserv-id, and no other id's", async () => {
    const vouched = mail('alice@example.test', 'hi', [
      ar('mx.trusted.test; dmarc=pass (p=REJECT sp=REJECT) header.from=example.test'),
      ar('mx.trusted.test; dmarc=fail header.from=example.test'),
    ]);
    expect(await authenticateSender(vouched, 'alice@example.test', trust)).toBe(
      'pass: mx.trusted.test says dmarc=pass header.from=example.test',
    );
    // The forger's own header of another id counts for nothing; gated's check then finds no signature.
    const forged = mail('alice@example.test', 'hi', [
      ar('mx.evil.test; dmarc=pass header.from=example.test'),
    ]);
    expect(await authenticateSender(forged, 'alice@example.test', trust)).toBe(
      'fail: dkim=none dmarc=fail for example.test',
    );
    // Without EMAIL_AUTHSERV_IDS no header is believed at all.
    expect(await authenticateSender(vouched, 'alice@example.test', own)).toMatch(/^fail: dkim=none/);
  });

  it('needs the pass to be for the From domain: dmarc of another domain or an unaligned dkim fail', async () => {
    const other = mail('alice@example.test', 'hi', [
      ar('mx.trusted.test; dkim=pass header.d=evil.test; dmarc=pass header.from=evil.test'),
    ]);
    expect(await authenticateSender(other, 'alice@example.test', trust)).toBe(
      'fail: mx.trusted.test says dkim=pass dmarc=pass for example.test',
    );
    const dkim = mail('alice@sub.example.test', 'hi', [
      ar('MX.Trusted.Test 1; dkim=pass (good signature) header.d=example.test header.s=mail; spf=fail'),
    ]);
    expect(await authenticateSender(dkim, 'alice@sub.example.test', trust)).toBe(
      'pass: mx.trusted.test says dkim=pass header.d=example.test',
    );
  });
});

describe('parseAuthResults', () => {
  it('reads the authserv-id, the results and their properties, without comments', () => {
    expect(
      parseAuthResults(
        'mx.google.com; dkim=pass header.i=@example.com header.s=s1 header.b="ab;c"; ' +
          'spf=pass (google.com: domain of a@example.com (nested) designates 1.2.3.4) smtp.mailfrom=a@example.com; ' +
          'dmarc/1=pass (p=NONE) header.from=Example.com',
      ),
    ).toEqual({
      authservId: 'mx.google.com',
      results: [
        {
          method: 'dkim',
          result: 'pass',
          props: { 'header.i': '@example.com', 'header.s': 's1', 'header.b': 'ab;c' },
        },
        { method: 'spf', result: 'pass', props: { 'smtp.mailfrom': 'a@example.com' } },
        { method: 'dmarc', result: 'pass', props: { 'header.from': 'example.com' } },
      ],
    });
    expect(parseAuthResults('mx.example.test; none')).toEqual({ authservId: 'mx.example.test', results: [] });
  });
});
