// dist/ as `npm start`, the tests and the image run it: gated's own modules bundled by esbuild from the CLI
// (gated/cli.ts) into dist/gated/cli.js and the chunks it shares with its lazy imports (dist/chunks/),
// with source maps beside them; the packages of node_modules stay imports. Node then reads and compiles
// about 45 files at `gated run` instead of 210 (on this tree: its CPU to /healthz 200 ~25 % less). Every
// dynamic import stays a chunk of its own, loaded when called: the commands' modules, the channels, the
// container runtimes, tracing.
//
// `npm start` and the test run (test/global-setup.ts) call ensureDist, which builds only when a source
// changed since the last build: one stat per source file against a manifest of their sizes and
// modification times (dist/.start-manifest.json); a build takes about 0.3 s, with no type check (`npm run
// typecheck` and `npm test` do that; `npm run build` checks the types, then builds).
//
//   node scripts/dist.mjs             ensureDist: build dist/ if a source changed
//   node scripts/dist.mjs --out DIR   build into DIR, always (the offline image build)
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
import { dirname, join, relative, resolve } from 'node:path';
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
  // The compiler settings and this build change the output too.
  for (const f of ['tsconfig.json', 'tsconfig.build.json', 'scripts/dist.mjs']) {
    const s = statSync(join(root, f));
    found[f] = `${s.size}:${s.mtimeMs}`;
  }
  return found;
}

/** The last build's manifest: `{ sources, outputs, previous }`, or undefined. */
function readManifest() {
  try {
    return JSON.parse(readFileSync(manifestFile, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Bundles the CLI into `outdir`; returns the files written, relative to it. Chunks are named by their
 * content, so a build writes new names beside the old ones and the entry is renamed over last: a gated
 * started from the last build still finds the chunks it imports later (a channel, a command).
 */
export async function bundle(outdir) {
  const { build } = await import('esbuild');
  const out = await build({
    entryPoints: [join(root, 'gated', 'cli.ts')],
    outdir,
    outbase: root,
    bundle: true,
    splitting: true,
    // node_modules stay where npm put them; only gated's own modules are bundled.
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    entryNames: '[dir]/[name]',
    chunkNames: 'chunks/[name]-[hash]',
    logLevel: 'warning',
    write: false,
  });
  const entry = join(outdir, 'gated', 'cli.js');
  // Each file written aside and renamed over the old one: another start at the same moment (two tests)
  // reads either the old file or the new one, never half of one. The entry last.
  const files = [...out.outputFiles].sort((a, b) => Number(a.path === entry) - Number(b.path === entry));
  for (const f of files) {
    mkdirSync(dirname(f.path), { recursive: true });
    const aside = `${f.path}.${process.pid}.tmp`;
    writeFileSync(aside, f.contents);
    renameSync(aside, f.path);
  }
  return files.map((f) => relative(outdir, f.path));
}

/**
 * What no build needs any more: the outputs of the build before the last (the last one's stay for a gated
 * that runs from it), and the per-file outputs of a dist/ made before the bundle (an old manifest maps
 * each source to its stat: its output was the source's path with .js).
 */
function stale(before, outputs) {
  if (!before) return [];
  const keep = new Set([...outputs, ...(before.outputs ?? [])]);
  const old = before.sources
    ? (before.previous ?? [])
    : Object.keys(before)
        .filter((f) => f.endsWith('.ts'))
        .map((f) => f.replace(/\.ts$/, '.js'));
  return old.filter((f) => !keep.has(f));
}

/** Bundles the sources into dist/ when one changed since the last build; true when it built. */
export async function ensureDist() {
  const now = sources();
  const before = readManifest();
  const was = before?.sources ?? before;
  const changed =
    !was ||
    Object.keys(now).length !== Object.keys(was).length ||
    Object.entries(now).some(([f, v]) => was[f] !== v) ||
    !existsSync(DIST_CLI);
  if (!changed) return false;
  mkdirSync(dist, { recursive: true });
  // Written after the build: a build that fails leaves no manifest, so the next start builds again.
  rmSync(manifestFile, { force: true });
  const outputs = await bundle(dist);
  for (const f of stale(before, outputs)) {
    rmSync(join(dist, f), { force: true });
    // The folders the old layout leaves empty go too.
    for (
      let d = dirname(join(dist, f));
      d !== dist && existsSync(d) && readdirSync(d).length === 0;
      d = dirname(d)
    )
      rmSync(d, { recursive: true });
  }
  const manifest = { sources: now, outputs, previous: before?.outputs ?? [] };
  const aside = `${manifestFile}.${process.pid}.tmp`;
  writeFileSync(aside, JSON.stringify(manifest));
  renameSync(aside, manifestFile);
  return true;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--out');
  if (at > 0) await bundle(resolve(process.argv[at + 1]));
  else await ensureDist();
}
