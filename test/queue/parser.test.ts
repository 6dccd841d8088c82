import { describe, expect, it } from 'vitest';
import { cleanResult } from '../../queue/protocol/clean.js';
import {
  createOutputParser,
  OUTPUT_END,
  OUTPUT_START,
  type OutputBlock,
  type ProblemKind,
} from '../../queue/protocol/parser.js';

function parse(chunks: Array<string | Buffer>, maxBlockBytes = 1 << 20) {
  const blocks: OutputBlock[] = [];
  const problems: ProblemKind[] = [];
  const p = createOutputParser({
    maxBlockBytes,
    onBlock: (b) => blocks.push(b),
    onProblem: (k) => problems.push(k),
  });
  for (const c of chunks) p.push(c);
  p.end();
  return { blocks, problems, stats: p.stats, parser: p };
}

const block = (obj: unknown, eol = '\n') =>
  `${OUTPUT_START}${eol}${JSON.stringify(obj)}${eol}${OUTPUT_END}${eol}`;

describe('output parser', () => {
  it('reads a block between marker lines and ignores the noise around it', () => {
    const { blocks, stats } = parse([
      `hello\n${block({ status: 'ok', result: 'hi', newSessionId: 's1' })}bye\n`,
    ]);
    expect(blocks).toEqual([{ status: 'ok', result: 'hi', newSessionId: 's1' }]);
    expect(stats.noiseBytes).toBe('hello\nbye\n'.length);
  });

  it('accepts CRLF and whitespace around markers, and a last line without newline', () => {
    const text = `  ${OUTPUT_START} \r\n{"status":"ok","result":"a"}\r\n\t${OUTPUT_END}\r`;
    expect(parse([text]).blocks).toEqual([{ status: 'ok', result: 'a' }]);
  });

  it('counts a marker only as a whole line', () => {
    const text = `x ${OUTPUT_START}\n{"status":"ok","result":"no"}\n${OUTPUT_END} y\n`;
    const { blocks, stats } = parse([text]);
    expect(blocks).toEqual([]);
    expect(stats.noiseBytes).toBe(text.length);
  });

  it('restarts on a START inside an open block and treats END without START as noise', () => {
    const text =
      `${OUTPUT_END}\n${OUTPUT_START}\n{"status":"ok","result":"lost"\n` +
      block({ status: 'ok', result: 'kept' });
    const { blocks, problems } = parse([text]);
    expect(blocks).toEqual([{ status: 'ok', result: 'kept' }]);
    expect(problems).toEqual(['restarted']);
  });

  it('logs and counts invalid JSON, wrong shapes and an unterminated block, and goes on', () => {
    const text =
      `${OUTPUT_START}\nnot json\n${OUTPUT_END}\n` +
      block([1, 2]) +
      block({ status: 'maybe', result: 'x' }) +
      block({ status: 'ok', result: 7 }) +
      block({ status: 'error', result: null, error: 'boom' }) +
      `${OUTPUT_START}\n{"status":"ok","result":"cut"`;
    const { blocks, problems, stats } = parse([text]);
    expect(blocks).toEqual([{ status: 'error', result: null, error: 'boom' }]);
    expect(problems).toEqual([
      'invalid_json',
      'invalid_shape',
      'invalid_shape',
      'invalid_shape',
      'unterminated',
    ]);
    expect(stats).toMatchObject({ blocks: 1, invalidJson: 1, invalidShape: 3, unterminated: 1 });
  });

  it('reads turn and partial, and refuses a turn that is not a positive integer', () => {
    const text =
      block({ status: 'ok', result: 'a', turn: 2 }) +
      block({ status: 'ok', result: 'draft', turn: 3, partial: true }) +
      block({ status: 'ok', result: 'b', turn: null, partial: false }) +
      block({ status: 'ok', result: 'x', turn: '1' }) +
      block({ status: 'ok', result: 'x', turn: 0 }) +
      block({ status: 'ok', result: 'x', turn: 1.5 }) +
      block({ status: 'ok', result: 'x', partial: 'yes' });
    const { blocks, problems } = parse([text]);
    expect(blocks).toEqual([
      { status: 'ok', result: 'a', turn: 2 },
      { status: 'ok', result: 'draft', turn: 3, partial: true },
      { status: 'ok', result: 'b' },
    ]);
    expect(problems).toEqual(['invalid_shape', 'invalid_shape', 'invalid_shape', 'invalid_shape']);
  });

  it('discards an oversize block with bounded memory and reads the next one', () => {
    const max = 4096;
    const big = JSON.stringify({ status: 'ok', result: 'x'.repeat(100_000) });
    const p = createOutputParser({ maxBlockBytes: max, onBlock: () => undefined });
    const seen: OutputBlock[] = [];
    const q = createOutputParser({ maxBlockBytes: max, onBlock: (b) => seen.push(b) });
    let peak = 0;
    for (const parser of [p, q]) {
      parser.push(`${OUTPUT_START}\n`);
      for (let i = 0; i < big.length; i += 1000) {
        parser.push(big.slice(i, i + 1000));
        peak = Math.max(peak, parser.buffered());
      }
      parser.push(`\n${OUTPUT_END}\n`);
      parser.push(block({ status: 'ok', result: 'after' }));
      parser.end();
    }
    expect(peak).toBeLessThanOrEqual(max + 1000);
    expect(q.stats.oversize).toBe(1);
    expect(seen).toEqual([{ status: 'ok', result: 'after' }]);
  });

  it('keeps only a marker-sized head of a long noise line', () => {
    const seen: OutputBlock[] = [];
    const p = createOutputParser({ maxBlockBytes: 1 << 20, onBlock: (b) => seen.push(b) });
    let peak = 0;
    for (let i = 0; i < 200; i++) {
      p.push('n'.repeat(10_000));
      peak = Math.max(peak, p.buffered());
    }
    p.push('\n' + block({ status: 'ok', result: 'fine' }));
    p.end();
    expect(peak).toBeLessThanOrEqual(10_000);
    expect(seen).toEqual([{ status: 'ok', result: 'fine' }]);
  });
});

// A small deterministic PRNG, so a failing property names its seed.
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = [
  'a',
  'Z',
  ' ',
  '"',
  '\\',
  '{',
  '}',
  '\t',
  'é',
  '😀',
  '中',
  '-',
  '<think>',
  '---GATED_OUTPUT_END---',
];

function randomText(r: () => number, max: number): string {
  let s = '';
  const n = Math.floor(r() * max);
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(r() * ALPHABET.length)];
  return s;
}

/** A valid stream: noise lines and blocks, with random line ends and marker padding. */
function validStream(r: () => number): { text: string; expected: OutputBlock[] } {
  const expected: OutputBlock[] = [];
  let text = '';
  const parts = 1 + Math.floor(r() * 8);
  for (let i = 0; i < parts; i++) {
    const eol = r() < 0.3 ? '\r\n' : '\n';
    if (r() < 0.4) {
      text += `noise ${randomText(r, 40).replace(/---/g, '-')}${eol}`;
      continue;
    }
    const b: OutputBlock = {
      status: r() < 0.8 ? 'ok' : 'error',
      result: r() < 0.9 ? randomText(r, 60) : null,
    };
    if (r() < 0.5) b.newSessionId = `s-${Math.floor(r() * 1000)}`;
    expected.push(b);
    const pad = r() < 0.3 ? ' \t' : '';
    text += `${pad}${OUTPUT_START}${pad}${eol}${JSON.stringify(b, null, r() < 0.3 ? 2 : 0)}${eol}${OUTPUT_END}${pad}${eol}`;
  }
  return { text, expected };
}

function chunked(buf: Buffer, r: () => number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length;) {
    const n = 1 + Math.floor(r() * (r() < 0.5 ? 4 : 64));
    out.push(buf.subarray(i, i + n));
    i += n;
  }
  return out;
}

describe('output parser properties', () => {
  it('any chunking of a valid stream yields the same blocks', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const r = rng(seed);
      const { text, expected } = validStream(r);
      const whole = parse([text]).blocks;
      expect(whole, `seed ${seed}`).toEqual(expected);
      const bytes = Buffer.from(text, 'utf8');
      for (let k = 0; k < 5; k++) expect(parse(chunked(bytes, r)).blocks, `seed ${seed}`).toEqual(expected);
    }
  });

  it('random bytes never throw and never produce a block', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const r = rng(seed * 7919);
      const bytes = Buffer.alloc(Math.floor(r() * 20_000));
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(r() * 256);
      // Markers sprinkled in: they open and close blocks whose bodies are still random bytes.
      const parts: Buffer[] = [];
      for (const c of chunked(bytes, r)) {
        parts.push(c);
        if (r() < 0.05) parts.push(Buffer.from(`\n${r() < 0.5 ? OUTPUT_START : OUTPUT_END}\n`));
      }
      const { blocks } = parse(chunked(Buffer.concat(parts), r), 2048);
      expect(blocks, `seed ${seed}`).toEqual([]);
    }
  });
});

describe('cleanResult', () => {
  it('removes internal and think sections, nested, multiline and unclosed', () => {
    expect(cleanResult('a <internal>x</internal> b')).toBe('a  b');
    expect(cleanResult('<think>\nplan\n</think>\nanswer')).toBe('answer');
    expect(cleanResult('x<think>a<internal>b</internal>c</think>y')).toBe('xy');
    expect(cleanResult('x<think>a<think>b</think>still hidden</think>y')).toBe('xy');
    expect(cleanResult('shown <INTERNAL>hidden to the end')).toBe('shown');
    expect(cleanResult('stray </think> close')).toBe('stray  close');
    expect(cleanResult('<internal>all of it</internal>  ')).toBe('');
    expect(cleanResult('a < think > b')).toBe('a < think > b');
  });
});
