/**
 * file of its own and a hard link to a decoy outside its folder, as fast as it can, 1,000 reads for
 * delivery (readInFolder, what delivery/files.ts sends) and 1,000 opens for the web chat's file endpoint
 * (openInFolder, streamed by http/chat-files.ts) send not one byte of the decoy. Both kinds of entry must
 * actually have been met (some reads refused as a hard link, some served the agent's bytes), or the race
 * did not happen and the test says so.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { FileRefused, openInFolder, readInFolder, spoolOf } from '../../core/safe-file.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';

const DECOY = 'DECOY: never to leave the machine\n';
const OWN = 'the agent file\n';

// The agent: renames a fresh file of its own, then a fresh hard link to the decoy, over out/f, forever.
// Renames replace the entry in one step, so a reader always finds one of the two (or, in a hard link's
// case, the same inode under two names).
const FLIPPER = `
const { linkSync, renameSync, writeFileSync, rmSync } = require('node:fs');
const [dir, decoy] = process.argv.slice(1);

process.stdout.write('flipping\\n');
for (;;) {
  writeFileSync(dir + '/own.tmp', ${JSON.stringify(OWN)});
  renameSync(dir + '/own.tmp', dir + '/f');
  rmSync(dir + '/link.tmp', { force: true });
  linkSync(decoy, dir + '/link.tmp');
  renameSync(dir + '/link.tmp', dir + '/f');
}
`;

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

async function flipping(root: string, decoy: string): Promise<void> {
  const out = join(root, 'out');
  mkdirSync(out);
  writeFileSync(join(out, 'f'), OWN);
  const child = spawn(process.execPath, ['-e', FLIPPER, out, decoy], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  stop = () => child.kill('SIGKILL');
  let said = '';
  child.stdout.on('data', (d) => (said += String(d)));
  await until(() => said.includes('flipping'), 10_000, 'the agent flipping');
}

/**
 * Tallies what the reads got: the agent's bytes, a refusal by reason, or anything else (foreign). 1,000
 * reads, and more (up to 20,000) until both of the agent's entries were met: on a loaded machine the
 * agent runs in long slices, and 1,000 opens in a row once all met the hard link.
 */
async function race(read: () => Promise<string>): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  const met = () => (seen.own ?? 0) > 0 && (seen['refused: hard link'] ?? 0) > 0;
  for (let i = 0; i < 1000 || (!met() && i < 20_000); i++) {
    let got: string;
    try {
      const text = await read();
      got = text === OWN ? 'own' : text.includes('DECOY') ? 'decoy' : `other: ${text.slice(0, 40)}`;
    } catch (err) {
      if (!(err instanceof FileRefused)) throw err;
      got = `refused: ${err.reason}`;
    }
    seen[got] = (seen[got] ?? 0) + 1;
  }
  return seen;
}

test('1,000 deliveries and 1,000 file-endpoint opens while the agent relinks: no byte of the decoy', async () => {
  const root = tempDir('gated-race-');
  const outside = tempDir('gated-race-decoy-');
  const decoy = join(outside, 'decoy.txt');
  writeFileSync(decoy, DECOY);
  await flipping(root, decoy);
  const spool = await spoolOf(root);

  const delivered = await race(async () => (await readInFolder(root, 'out/f', 1 << 20, spool)).toString());
  const served = await race(async () => {
    const { handle } = await openInFolder(root, 'out/f', spool);
    try {
      // As the endpoint does: the opened descriptor is streamed, nothing is opened by name again.
      const chunks: Buffer[] = [];
      for await (const c of handle.createReadStream()) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString();
    } finally {
      await handle.close().catch(() => undefined);
    }
  });
  stop?.();
  console.log(`delivery ${JSON.stringify(delivered)}; file endpoint ${JSON.stringify(served)}`);
  for (const seen of [delivered, served]) {
    expect(seen.decoy ?? 0).toBe(0);
    expect(Object.keys(seen).filter((k) => k.startsWith('other'))).toEqual([]);
    // The race was real: both entries were met.
    expect(seen.own ?? 0).toBeGreaterThan(0);
    expect(seen['refused: hard link'] ?? 0).toBeGreaterThan(0);
  }
  expect(readFileSync(decoy, 'utf8')).toBe(DECOY);
}, 60_000);
