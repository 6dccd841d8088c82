/**
 * gated's shutdown steps (gated/base.ts runSteps): each runs despite the failure of one before it, and a step
 * that never settles is left behind at its bound, named in the log, so the steps after it (the last
 * commit, the owner row, the database) still run. Without the bound such a step ends the process: once
 * nothing else keeps the event loop alive, Node gives up on the pending top-level await and exits 13, which
 * `gated run` did once after a flood of connections (test/gated/connection-flood.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../core/log.js';
import { packageFile } from '../../core/paths.js';
import { runSteps } from '../../gated/base.js';
import { tempDir } from '../helpers/db.js';

/** A logger whose JSON lines are kept, parsed. */
function keptLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of String(chunk).split('\n'))
        if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger('warn', false, sink), lines };
}

describe('shutdown steps', () => {
  it('run in order; one that throws is logged, one that never settles is left at its bound, the rest run', async () => {
    const { log, lines } = keptLogger();
    const ran: string[] = [];
    const started = Date.now();
    await runSteps(
      [
        ['first', () => void ran.push('first')],
        ['hangs', () => (ran.push('hangs'), new Promise(() => {})), 100],
        ['throws', () => (ran.push('throws'), Promise.reject(new Error('no such socket')))],
        ['last', () => void ran.push('last')],
      ],
      log,
    );
    expect(ran).toEqual(['first', 'hangs', 'throws', 'last']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(lines.map((l) => [l.step, l.msg])).toEqual([
      ['hangs', 'shutdown step did not finish in time: going on without it'],
      ['throws', 'shutdown step failed'],
    ]);
    expect(lines[0]!.ms).toBe(100);
    expect(lines[1]!.err).toBe('no such socket');
  });

  it('a step that never settles, with nothing else to keep the process up: the steps after it run, exit 0', () => {
    const script = join(tempDir('gated-steps-'), 'steps.mts');
    const base = packageFile('gated', 'base.ts');
    writeFileSync(
      script,
      [
        `import { runSteps } from ${JSON.stringify(base)};`,
        `import { silentLogger } from ${JSON.stringify(packageFile('core', 'log.ts'))};`,
        `await runSteps([['hangs', () => new Promise(() => {}), 200], ['last', () => console.log('last ran')]], silentLogger());`,
      ].join('\n'),
    );
    const r = spawnSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.stderr).not.toMatch(/unsettled top-level await/);
    expect({ status: r.status, out: r.stdout.trim() }).toEqual({ status: 0, out: 'last ran' });
  }, 40_000);
});
