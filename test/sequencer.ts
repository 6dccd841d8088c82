/**
 * The order test files start in (vitest.config.ts, sequence.sequencer): the longest first, so the run's
 * tail is many short files spread over the workers instead of one long file started last. A file's
 * duration is the one vitest measured on this machine in an earlier run (its results cache), else the
 * one committed in test/durations.json (a fresh clone has no cache), else UNKNOWN_MS: a new file starts
 * behind the known long ones and ahead of the many short ones. Ties are
 * broken by path, so the order is the same from run to run. `npm run test:durations` rewrites the
 * committed list from the last run's cache.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** test/durations.json: path relative to the root → milliseconds of one earlier run, at four at once. */
function committed(root: string): Map<string, number> {
  try {
    const raw = JSON.parse(readFileSync(`${root}/test/durations.json`, 'utf8')) as Record<string, number>;
    return new Map(Object.entries(raw));
  } catch {
    return new Map();
  }
}

/** What a file of unknown duration is taken to last: about the 90th percentile of the suite's files. */
const UNKNOWN_MS = 20_000;

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const known = committed(root);
    const duration = (spec: TestSpecification): number => {
      const path = relative(root, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      if (cached && !cached.failed && cached.duration > 0) return cached.duration;
      return known.get(path) ?? UNKNOWN_MS;
    };
    const keyed = files.map((spec) => ({ spec, ms: duration(spec), path: spec.moduleId }));
    keyed.sort((a, b) => (a.ms === b.ms ? (a.path < b.path ? -1 : 1) : b.ms - a.ms));
    return keyed.map((k) => k.spec);
  }
}
