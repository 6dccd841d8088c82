import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Hono, type Context } from 'hono';
import { packageFile } from '../core/paths.js';

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  png: 'image/png',
  svg: 'image/svg+xml',
};

// Only names of this shape are ever read, from web/ and nowhere else: no `/`, no `..`, a known type.
const ASSET_RE = /^[a-z0-9][a-z0-9_-]*\.(js|css|png|svg)$/;

async function asset(name: string): Promise<{ body: Buffer; type: string } | undefined> {
  const ext = name.slice(name.lastIndexOf('.') + 1);
  const type = TYPES[ext];
  if (!type) return undefined;
  try {
    return { body: await readFile(packageFile('web', name)), type };
  } catch {
    return undefined;
  }
}

/**
 * Third-party browser files served from the installed packages (never a CDN: the pages work offline).
 * Name → path inside node_modules as the package ships it.
 */
const VENDOR: Record<string, { pkg: string; file: string; type: string }> = {
  'uplot.js': { pkg: 'uplot', file: 'dist/uPlot.esm.js', type: TYPES.js! },
  'uplot.css': { pkg: 'uplot', file: 'dist/uPlot.min.css', type: TYPES.css! },
  'marked.js': { pkg: 'marked', file: 'lib/marked.esm.js', type: TYPES.js! },
};

const require = createRequire(import.meta.url);
const vendorCache = new Map<string, Buffer>();

async function vendor(name: string): Promise<{ body: Buffer; type: string } | undefined> {
  const v = VENDOR[name];
  if (!v) return undefined;
  let body = vendorCache.get(name);
  if (!body) {
    // The package's own location, wherever npm put it (a checkout, or gated installed as a dependency).
    body = await readFile(join(dirname(require.resolve(`${v.pkg}/package.json`)), v.file));
    vendorCache.set(name, body);
  }
  return { body, type: v.type };
}

/**
 * The pages and their assets from the package's web/ folder, read per request (tiny files; an edit shows
 * on reload, no build step). `/` is the chat, `/dashboard` the dashboard, `/dashboard/access` its access
 * page, `/dashboard/memory` what the groups' agents remember, `/dashboard/approvals` its tool approvals, `/dashboard/workflows` the workflow runs, `/dashboard/waiting` everything waiting on a person, `/assets/<name>` the rest, and `/assets/vendor/<name>` the chart library from node_modules.
 */
export function staticApi(): Hono {
  const app = new Hono();
  const page = (file: string) => async (c: Context) => {
    const a = await asset(file);
    if (!a) return c.text(`web/${file} is missing from this installation`, 500);
    return c.body(new Uint8Array(a.body), 200, { 'Content-Type': a.type, 'Cache-Control': 'no-cache' });
  };
  app.get('/', page('index.html'));
  app.get('/dashboard', page('dashboard.html'));
  app.get('/dashboard/tasks', page('tasks.html'));
  app.get('/dashboard/memory', page('memory.html'));
  app.get('/dashboard/access', page('access.html'));
  app.get('/dashboard/approvals', page('approvals.html'));
  app.get('/dashboard/workflows', page('workflows.html'));
  app.get('/dashboard/waiting', page('waiting.html'));
  app.get('/assets/vendor/:name', async (c) => {
    const a = await vendor(c.req.param('name')).catch(() => undefined);
    if (!a) return c.json({ error: 'not found' }, 404);
    return c.body(new Uint8Array(a.body), 200, { 'Content-Type': a.type, 'Cache-Control': 'max-age=3600' });
  });
  app.get('/assets/:name', async (c) => {
    const name = c.req.param('name');
    const a = ASSET_RE.test(name) ? await asset(name) : undefined;
    if (!a) return c.json({ error: 'not found' }, 404);
    return c.body(new Uint8Array(a.body), 200, { 'Content-Type': a.type, 'Cache-Control': 'no-cache' });
  });
  return app;
}
