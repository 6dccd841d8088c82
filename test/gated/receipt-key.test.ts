import { chmodSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { receiptKey } from '../../gated/receipt-key.js';
import { tempDir } from '../helpers/db.js';

test('the receipt key: made owner-only once and read back; refused when others may read it or it is a link', () => {
  const dir = tempDir();
  const path = join(dir, 'data', 'receipts.key');
  const key = receiptKey(path);
  expect(key.length).toBe(32);
  expect(statSync(path).mode & 0o777).toBe(0o600);
  expect(receiptKey(path).equals(key)).toBe(true);

  chmodSync(path, 0o644);
  expect(() => receiptKey(path)).toThrow(/may be read by others \(mode 644\): chmod 600 it/);
  chmodSync(path, 0o600);

  // A link planted where the key should be is never followed, nor is a key of the wrong length used.
  const planted = join(dir, 'planted.key');
  writeFileSync(planted, Buffer.alloc(32), { mode: 0o600 });
  const link = join(dir, 'link.key');
  symlinkSync(planted, link);
  expect(() => receiptKey(link)).toThrow(/cannot be used: ELOOP/);
  const short = join(dir, 'short.key');
  writeFileSync(short, 'abc', { mode: 0o600 });
  expect(() => receiptKey(short)).toThrow(/is not 32 bytes long/);
});
