import { styleText } from 'node:util';

/** A colour (or emphasis) for one cell on a terminal. */
export type Tint = 'red' | 'green' | 'yellow' | 'cyan' | 'magenta' | 'dim' | 'bold';

/** A table cell: text, or text with a tint used only on a colour terminal. */
export type Cell = string | number | null | { text: string; tint?: Tint | undefined };

/** How tables are written: aligned (and maybe coloured) for a person at a terminal, tab-separated otherwise. */
export interface TableStyle {
  /** Align columns with spaces; false writes tab-separated lines for scripts (cut, awk, sort). */
  aligned: boolean;
  /** Use ANSI colours (only when aligned). */
  color: boolean;
}

/**
 * The style for `stream`: aligned and coloured on a terminal, plain tab-separated into a pipe or file.
 * NO_COLOR (any value) keeps the alignment and drops the colours; FORCE_COLOR=1 colours a pipe too.
 */
export function terminalStyle(
  stream: { isTTY?: boolean } = process.stdout,
  env: Record<string, string | undefined> = process.env,
): TableStyle {
  const tty = stream.isTTY === true;
  const force = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== '';
  const aligned = tty || force;
  return { aligned, color: aligned && env.NO_COLOR === undefined };
}

function text(c: Cell): string {
  if (c === null) return '';
  return typeof c === 'object' ? c.text : String(c);
}

/** `s` in `tint` when the style has colour (the style decided already: no second check of the stream). */
export function paint(s: string, tint: Tint | undefined, style: TableStyle): string {
  return tint && style.color && s.trim() !== '' ? styleText(tint, s, { validateStream: false }) : s;
}

/** Display width: code points (the tables hold ids, folders, JIDs and short texts). */
function width(s: string): number {
  return [...s].length;
}

/**
 * Formats rows under a header. Aligned: columns padded to their widest cell, the header bold, tints
 * applied; the last column is not padded. Plain: the cells joined by tabs (tabs and newlines inside a cell
 * become spaces so every row stays one line of the same number of fields).
 */
export function formatTable(header: string[], rows: Cell[][], style: TableStyle): string[] {
  if (!style.aligned) {
    const clean = (s: string) => s.replace(/[\t\r\n]+/g, ' ');
    return [header.join('\t'), ...rows.map((r) => r.map((c) => clean(text(c))).join('\t'))];
  }
  const widths = header.map((h, i) => Math.max(width(h), ...rows.map((r) => width(text(r[i] ?? '')))));
  const line = (cells: Cell[], head: boolean) =>
    cells
      .map((c, i) => {
        const t = text(c).replace(/[\r\n]+/g, ' ');
        const pad = i === cells.length - 1 ? '' : ' '.repeat(widths[i]! - width(t));
        return (
          paint(t, head ? 'bold' : c !== null && typeof c === 'object' ? c.tint : undefined, style) + pad
        );
      })
      .join('  ')
      .trimEnd();
  return [line(header, true), ...rows.map((r) => line(r, false))];
}

/** The tint of a run result or delivery state. */
export function resultTint(result: string | null): Tint | undefined {
  switch (result) {
    case 'ok':
    case 'sent':
    case 'done':
      return 'green';
    case 'error':
    case 'failed':
    case 'timeout':
      return 'red';
    case null:
    case 'running':
    case 'pending':
    case 'ready':
    case 'held':
      return 'yellow';
    case 'stopped':
    case 'parked':
      return 'magenta';
    case 'idle':
      return 'cyan';
    default:
      return undefined;
  }
}
