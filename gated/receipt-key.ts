import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { UsageError } from '../core/errors.js';

/**
 * The instance's receipt key (docs/SECURITY.md, "Receipts"): 32 random bytes in GATED_RECEIPT_KEY_FILE, made
 * on first use with mode 0600 and never read through a link. It lives beside the database, which no agent
 * can read (docs/SECURITY.md, "Runtimes"), and reaches no agent, mount, environment, log or backup: a key
 * that can be read by anyone but its owner is refused by name, since whoever reads it can forge receipts.
 */

const KEY_BYTES = 32;

/** The key in `path`, made there first when the file does not exist. */
export function receiptKey(path: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw keyError(path, err);
    return makeKey(path);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new UsageError(`the receipt key ${path} is not a regular file`);
    if ((st.mode & 0o077) !== 0)
      throw new UsageError(
        `the receipt key ${path} may be read by others (mode ${(st.mode & 0o777).toString(8)}): chmod 600 it, or remove it to make a new one (older receipts then no longer verify)`,
      );
    const buf = Buffer.alloc(KEY_BYTES + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (n !== KEY_BYTES) throw new UsageError(`the receipt key ${path} is not ${KEY_BYTES} bytes long`);
    return buf.subarray(0, KEY_BYTES);
  } finally {
    closeSync(fd);
  }
}

function makeKey(path: string): Buffer {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const key = randomBytes(KEY_BYTES);
  // Written whole under another name, then linked: a process that reads the key never sees half of it.
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const fd = openSync(
    tmp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    writeSync(fd, key);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, path);
  } catch (err) {
    // Another process made it first: use that one.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return receiptKey(path);
    throw keyError(path, err);
  } finally {
    unlinkSync(tmp);
  }
  return key;
}

function keyError(path: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  return new UsageError(`the receipt key ${path} cannot be used: ${e.code ?? ''} ${e.message}`.trim());
}
