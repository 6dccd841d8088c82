/**
 * Bounds on what an agent's block may hold beyond its size (docs/PROTOCOL.md, docs/SECURITY.md "Agent"):
 * how deep its JSON may nest, and what a session id may be. A block past them is refused, or its field
 * ignored, with a named reason.
 */

/**
 * How deep a block's JSON may nest (objects and arrays). JSON.parse takes any depth, but everything that
 * later writes a value back out (JSON.stringify of an action or a tool's input, a log line) recurses and
 * would throw past a few thousand levels, inside the transaction that stores the block.
 */
export const MAX_BLOCK_DEPTH = 64;

/** True when `value` nests no deeper than `max` levels of objects and arrays (walked without recursion). */
export function nestsWithin(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return false;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return true;
}

/** Longest session id an agent may announce (ids are handles: UUIDs, short tokens). */
export const MAX_SESSION_ID = 256;

/** Why a `newSessionId` cannot be kept, or null when it can. */
export function sessionIdProblem(id: string): string | null {
  if (id.length > MAX_SESSION_ID) return `longer than ${MAX_SESSION_ID} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id)) return 'control characters';
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(id)) {
    return 'a lone surrogate (not valid Unicode)';
  }
  return null;
}
