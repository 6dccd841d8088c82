// dist/ as `npm start` runs it: every source transpiled with esbuild into dist/ only when one changed since
// the last build. The check is one stat per source file against a manifest of their sizes and modification
// times (dist/.start-manifest.json); a change transpiles every source (about 0.2 s, no type check: `npm run
// typecheck` and `npm test` do that, `npm run build` is the production build with tsc). Used by
// scripts/start.mjs and by the test run (test/global-setup.ts), whose tests start the CLI from dist/.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const manifestFile = join(dist, '.start-manifest.json');

/** The compiled CLI. */
export const DIST_CLI = join(dist, 'gated', 'cli.js');

/** The folders tsconfig.build.json compiles. */
const SOURCES = [
  'core',
  'router',
  'worktrees',
  'store',
  'gateway',
  'queue',
  'channels',
  'voice',
  'delivery',
  'http',
  'gated',
];

/** Every source file, relative to the root, with its size and modification time. */
function sources() {
  const found = {};
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
        const s = statSync(p);
        found[relative(root, p)] = `${s.size}:${s.mtimeMs}`;
      }
    }
  };
  for (const d of SOURCES) if (existsSync(join(root, d))) walk(join(root, d));
  // The compiler settings change the output too.
  for (const f of ['tsconfig.json', 'tsconfig.build.json']) {
    const s = statSync(join(root, f));
    found[f] = `${s.size}:${s.mtimeMs}`;
  }
  return found;
}

function readManifest() {
  try {
    return JSON.parse(readFileSync(manifestFile, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Transpiles every source into dist/ (the paths tsc would write), dropping outputs of deleted sources. */
async function build(now, before) {
  const { build: esbuild } = await import('esbuild');
  for (const file of Object.keys(before ?? {}))
    if (!(file in now) && file.endsWith('.ts'))
      rmSync(join(dist, file.replace(/\.ts$/, '.js')), { force: true });
  const entryPoints = Object.keys(now).filter((f) => f.endsWith('.ts'));
  const out = await esbuild({
    entryPoints: entryPoints.map((f) => join(root, f)),
    outdir: dist,
    outbase: root,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'warning',
    write: false,
  });
  // Each file written aside and renamed over the old one: another start at the same moment (two tests)
  // reads either the old file or the new one, never half of one.
  for (const f of out.outputFiles) {
    mkdirSync(dirname(f.path), { recursive: true });
    const aside = `${f.path}.${process.pid}.tmp`;
    writeFileSync(aside, f.contents);
    renameSync(aside, f.path);
  }
}

/** Transpiles the sources into dist/ when one changed since the last build; true when it built. */
export async function ensureDist() {
  const now = sources();
  const before = readManifest();
  const changed =
    !before ||
    Object.keys(now).length !== Object.keys(before).length ||
    Object.entries(now).some(([f, v]) => before[f] !== v) ||
    !existsSync(DIST_CLI);
  if (!changed) return false;
  mkdirSync(dist, { recursive: true });
  // Written after the build: a build that fails leaves no manifest, so the next start builds again.
  rmSync(manifestFile, { force: true });
  await build(now, before);
  const aside = `${manifestFile}.${process.pid}.tmp`;
  writeFileSync(aside, JSON.stringify(now));
  renameSync(aside, manifestFile);
  return true;
}
