import { parseMail } from '../channels/email/bounds.js';
import { ParsedMails } from '../channels/email/parsed.js';

/** One mail's files read as the inbox downloader reads them: CPU and peak memory, before and now. */
export interface MailParseRow {
  scenario: 'mailparse';
  mail: string;
  how: string;
  parses: number;
  cpuMs: number;
  /** Resident memory at most while its files were read, above what it was before (MB). */
  peakRssGrowthMB: number;
}

/** A multipart mail of `n` attachments of `bytes` each (base64, as mail carries them). */
function mailOf(n: number, bytes: number): Buffer {
  const head = [
    'From: Alice <alice@example.test>',
    'To: bot@example.test',
    'Subject: many parts',
    'Message-ID: <bench@example.test>',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b0"',
    '',
    '--b0',
    'Content-Type: text/plain',
    '',
    'see the files',
  ];
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    const data = Buffer.alloc(bytes, i % 251)
      .toString('base64')
      .replace(/.{76}/g, '$&\r\n');
    parts.push(
      `--b0\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="f${i}.bin"\r\nContent-Transfer-Encoding: base64\r\n\r\n${data}`,
    );
  }
  return Buffer.from([...head, ...parts, '--b0--', ''].join('\r\n'));
}

async function measure(mail: string, how: string, read: () => Promise<number>): Promise<MailParseRow> {
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  const cpu0 = process.cpuUsage();
  const parses = await read();
  const cpu = process.cpuUsage(cpu0);
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  return {
    scenario: 'mailparse',
    mail,
    how,
    parses,
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    peakRssGrowthMB: Math.round((peak - rss0) / 2 ** 20),
  };
}

/**
 * A 990-part mail (1 KB each; mailparser refuses more than 1,000 nodes) and a 100 × 100 KB one, each file read in turn as the inbox downloader
 * asks for them (channels/email/index.ts fetchAttachment): the way before, parsing the whole mail again
 * for every file (`before` only when asked: a minute for the 990 parts), and now, one parse kept for all
 * (ParsedMails). IMAP's own fetch is left out: what is measured is gated's CPU and memory per mail.
 */
export async function mailParseBench(before: boolean): Promise<MailParseRow[]> {
  const rows: MailParseRow[] = [];
  for (const [name, n, bytes] of [
    ['990 parts × 1 KB', 990, 1024],
    ['100 parts × 100 KB', 100, 100 * 1024],
  ] as const) {
    const source = mailOf(n, bytes);
    rows.push(
      await measure(name, 'one parse for all files (now)', async () => {
        const kept = new ParsedMails();
        let parses = 0;
        const load = async () => (parses++, { mail: parseMail(source), bytes: source.length });
        for (let i = 0; i < n; i++) {
          const mail = await kept.get('1:1', load);
          if (!mail.attachments[i]) throw new Error(`no attachment ${i}`);
        }
        kept.clear();
        return parses;
      }),
    );
    if (!before) continue;
    // A parse per file costs about the same each time: 20 are timed and the CPU scaled to all n.
    const sample = Math.min(n, 20);
    const row = await measure(
      name,
      `a parse per file (before; ${sample} timed, CPU scaled to ${n})`,
      async () => {
        for (let i = 0; i < sample; i++)
          if (!(await parseMail(source)).attachments[i]) throw new Error(`no ${i}`);
        return n;
      },
    );
    rows.push({ ...row, cpuMs: Math.round((row.cpuMs * n) / sample) });
  }
  return rows;
}
