import { simpleParser, type ParsedMail } from 'mailparser';

/**
 * What gated reads of one mail (docs/CHANNELS.md, "Email"): a mail of more MIME parts or more bytes than
 * these is not parsed whole (parsing thousands of parts costs minutes of CPU and memory many times the
 * mail's size); its headers alone are read and it is stored as a message that says why, so the sender is
 * answered like any correspondent (or the operator finds the row) instead of the mail vanishing.
 */
export interface MailBounds {
  /** MIME parts one mail may hold (each part's own header counts one). */
  maxParts: number;
  /** Bytes of one mail's whole source. */
  maxBytes: number;
}

/** The defaults: generous for people, far below what a crafted mail can hold. */
export const DEFAULT_MAIL_BOUNDS: MailBounds = { maxParts: 500, maxBytes: 40 * 1024 * 1024 };

const PARSE_OPTIONS = { skipTextToHtml: true, skipImageLinks: true } as const;

/**
 * The MIME parts of a mail, counted without parsing it: its `Content-Type` header lines (the mail's own
 * and each part's). A native scan of the bytes, a few ms for tens of MB.
 */
export function countParts(source: Buffer): number {
  let n = 0;
  for (const needle of ['\nContent-Type:', '\ncontent-type:', '\nContent-type:', '\nCONTENT-TYPE:']) {
    for (let at = source.indexOf(needle); at >= 0; at = source.indexOf(needle, at + needle.length)) n++;
  }
  return n;
}

/** Why a mail is over the bounds ('': it is not). */
export function overBounds(source: Buffer, bounds: MailBounds): string {
  if (source.length > bounds.maxBytes)
    return `${source.length.toLocaleString('en')} bytes, more than the ${bounds.maxBytes.toLocaleString('en')} gated reads`;
  const parts = countParts(source);
  if (parts > bounds.maxParts)
    return `${parts.toLocaleString('en')} MIME parts, more than the ${bounds.maxParts.toLocaleString('en')} gated reads`;
  return '';
}

/**
 * A mail over the bounds, as gated stores it: its own headers (sender, subject, Message-ID, thread) with a
 * plain text body that says why the rest was not read. Its header block is all that is parsed.
 */
export async function headersOnly(source: Buffer, why: string): Promise<ParsedMail> {
  let end = source.indexOf('\r\n\r\n');
  if (end < 0) end = source.indexOf('\n\n');
  const head = source.subarray(0, end < 0 ? Math.min(source.length, 256 * 1024) : end).toString('latin1');
  // The mail's own body headers describe what is not read: left out, with their folded lines.
  const kept = head
    .split(/\r?\n(?![ \t])/)
    .filter((h) => !/^(content-type|content-transfer-encoding|mime-version)\s*:/i.test(h));
  const note = `(gated did not read this mail: ${why}. Only its headers were kept.)`;
  const rebuilt = [...kept, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', note, ''];
  return simpleParser(Buffer.from(rebuilt.join('\r\n'), 'latin1'), PARSE_OPTIONS);
}

/** A whole mail parsed, with the options the channel uses everywhere. */
export function parseMail(source: Buffer): Promise<ParsedMail> {
  return simpleParser(source, PARSE_OPTIONS);
}
