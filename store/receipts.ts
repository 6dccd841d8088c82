import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Receipts of tool calls (docs/SECURITY.md, "Receipts"): each sealed `tool_calls` row carries an
 * HMAC-SHA256 under the instance's key over the fields below and the receipt of the record sealed before it
 * in the same run, so a record changed, removed from the middle or moved to another run no longer verifies,
 * and neither does any record after it. Pure: the key comes from the caller (gated/receipt-key.ts reads it).
 */

/** The receipt format's version, the first field signed and the prefix of what the agent is handed. */
export const RECEIPT_VERSION = 'gated-receipt:v1';

/** The fields of a record a receipt signs, in this order. */
export interface SignedCall {
  run_id: number;
  seq: number;
  turn: number | null;
  call_id: string;
  tool: string;
  input: string;
  input_bytes: number;
  input_sha256: string;
  decision: string | null;
  decided_by: string | null;
  approval_id: number | null;
  started_at: number;
  decided_at: number | null;
  ended_at: number | null;
  output_bytes: number | null;
  output_sha256: string | null;
  error: string | null;
  prev: string;
}

/** The canonical text signed: a JSON array, so no field's content can be read as the next field. */
export function signedText(c: SignedCall): string {
  return JSON.stringify([
    RECEIPT_VERSION,
    c.run_id,
    c.seq,
    c.turn,
    c.call_id,
    c.tool,
    c.input,
    c.input_bytes,
    c.input_sha256,
    c.decision,
    c.decided_by,
    c.approval_id,
    c.started_at,
    c.decided_at,
    c.ended_at,
    c.output_bytes,
    c.output_sha256,
    c.error,
    c.prev,
  ]);
}

/** The record's MAC (64 hex characters) under `key`. */
export function macOf(key: Buffer, c: SignedCall): string {
  return createHmac('sha256', key).update(signedText(c)).digest('hex');
}

/** SHA-256 of a text (its UTF-8 bytes), hex. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The receipt as the agent is handed it: `gated-receipt:v1:RUN.SEQ:MAC`. */
export function receiptText(runId: number, seq: number, mac: string): string {
  return `${RECEIPT_VERSION}:${runId}.${seq}:${mac}`;
}

/** A receipt's parts, or null when the text is not one (extra text around it is allowed). */
export function parseReceipt(text: string): { runId: number; seq: number; mac: string } | null {
  const m = /gated-receipt:v1:(\d{1,15})\.(\d{1,15}):([0-9a-f]{64})/.exec(text);
  if (!m) return null;
  return { runId: Number(m[1]), seq: Number(m[2]), mac: m[3]! };
}

/** Two MACs compared in constant time. */
export function sameMac(a: string | null, b: string): boolean {
  if (a === null || a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** A sealed record as stored, for the chain check. */
export interface StoredCall extends SignedCall {
  id: number;
  receipt: string | null;
}

/** The first broken link of a run's chain: which record, and why. */
export interface BrokenLink {
  run_id: number;
  seq: number;
  id: number;
  reason: string;
}

/**
 * Checks one run's sealed records, in `seq` order: the places are 1, 2, … without a gap, each `prev` is the
 * receipt before it ('' for the first), and each receipt is the MAC of its record. Null when all hold.
 * What this cannot see: records removed from the end of the chain (docs/SECURITY.md).
 */
export function checkChain(key: Buffer, calls: readonly StoredCall[]): BrokenLink | null {
  let prev = '';
  for (const [i, c] of calls.entries()) {
    const at = { run_id: c.run_id, seq: c.seq, id: c.id };
    if (c.seq !== i + 1) return { ...at, reason: `expected place ${i + 1} in the chain, found ${c.seq}` };
    if (c.prev !== prev)
      return {
        ...at,
        reason: 'its link to the record before it does not match (a record was removed or changed)',
      };
    if (!sameMac(c.receipt, macOf(key, c)))
      return {
        ...at,
        reason: 'its receipt does not match its fields (the record was changed, or signed under another key)',
      };
    prev = c.receipt!;
  }
  return null;
}
