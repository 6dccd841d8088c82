import { PassThrough } from 'node:stream';
import pino from 'pino';
import { prettyFactory } from 'pino-pretty';
import { describe, expect, it } from 'vitest';
import { prettyOptions } from '../../core/log.js';

/** One JSON log line as gated's logger writes it (a child logger of the queue). */
function jsonLine(): string {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d) => (text += String(d)));
  const log = pino({ base: undefined }, out).child({ part: 'queue' });
  log.warn({ runId: 7, result: 'error' }, 'run ended');
  return text;
}

describe('terminal logs', () => {
  it('pretty lines: coloured level, clock time, the part before the message, fields below', () => {
    const line = jsonLine();
    expect(JSON.parse(line)).toMatchObject({ level: 40, part: 'queue', msg: 'run ended', runId: 7 });
    const pretty = prettyFactory(prettyOptions({}))(line);
    expect(pretty).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] /);
    expect(pretty).toContain('\u001b[33mWARN\u001b[39m');
    expect(pretty).toContain('queue · run ended');
    expect(pretty).toContain('\n    \u001b[35mrunId\u001b[39m: 7\n');
    expect(pretty).not.toMatch(/\bpart: /);
  });

  it('NO_COLOR keeps the layout and drops the colours', () => {
    const pretty = prettyFactory(prettyOptions({ NO_COLOR: '1' }))(jsonLine());
    expect(pretty).not.toContain('\u001b[');
    expect(pretty).toContain('WARN: queue · run ended');
  });
});
