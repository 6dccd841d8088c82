import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package root: the nearest folder above this file that holds schema.sql. Works the same from the
 * TypeScript sources (tests, tsx) and from the compiled dist/ tree.
 */
export const PACKAGE_ROOT: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'schema.sql')) && existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('gated: cannot find schema.sql above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
})();

/** Absolute path of a file shipped with the package. */
export function packageFile(...parts: string[]): string {
  return join(PACKAGE_ROOT, ...parts);
}
