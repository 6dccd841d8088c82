import { readdirSync, readFileSync } from 'node:fs';

/**
 * gated's own file descriptors, as Linux shows them in /proc/self: how many it may open (the soft
 * RLIMIT_NOFILE, which Node raises to the hard limit at start) and how many are open now. Elsewhere both
 * are unknown (null) and nothing is derived from them.
 */

/** Share of the limit from which /healthz reports the descriptors near exhaustion. */
export const DESCRIPTORS_NEAR = 0.9;

let limit: number | null | undefined;

/** The soft limit on open descriptors ("Max open files"), read once; null when /proc cannot tell. */
export function descriptorLimit(): number | null {
  if (limit !== undefined) return limit;
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    limit = line?.[1] === undefined || line[1] === 'unlimited' ? null : Number(line[1]);
  } catch {
    // Not Linux, or no descriptor left to read it with: then it is read again next time.
    return null;
  }
  return limit;
}

/**
 * The descriptors open now (the directory's own, made to read it, left out). Throws when the directory
 * cannot be opened: with EMFILE that is itself the answer, the descriptors are exhausted.
 */
export function openDescriptors(): number {
  return readdirSync('/proc/self/fd').length - 1;
}

/**
 * 'ok', or why the descriptors are a problem: exhausted (not even /proc/self/fd can be opened) or near
 * their limit. Unknown on a system without /proc: 'ok', since nothing can be told.
 */
export function descriptorHealth(
  read: { limit(): number | null; open(): number } = { limit: descriptorLimit, open: openDescriptors },
): string {
  const max = read.limit();
  let open: number;
  try {
    open = read.open();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EMFILE' || code === 'ENFILE')
      return `exhausted: no descriptor left to open /proc/self/fd (${code}, limit ${max ?? 'unknown'})`;
    return 'ok';
  }
  if (max !== null && open >= max * DESCRIPTORS_NEAR) return `near exhaustion: ${open} of ${max} open`;
  return 'ok';
}
