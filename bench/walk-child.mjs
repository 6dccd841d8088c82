// The gated of bench/walk.ts: the code compiled file by file (dist/walk/), started from the environment, and a coverage mark
// on demand. NODE_V8_COVERAGE is set by the parent; each `mark` writes the counts since the last one
// (v8.takeCoverage resets them) and answers `marked`.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import v8 from 'node:v8';

const dist = process.argv[2];
const { loadConfig } = await import(pathToFileURL(join(dist, 'core', 'config.js')).href);
const { silentLogger } = await import(pathToFileURL(join(dist, 'core', 'log.js')).href);
const { startGated } = await import(pathToFileURL(join(dist, 'gated', 'app.js')).href);

// No owner row: its heartbeat is a timer of its own that would fall inside a walk now and then (walk.ts).
const gated = await startGated({
  config: loadConfig(process.env),
  log: silentLogger(),
  http: false,
  exclusive: false,
});
process.on('message', (m) => {
  if (m === 'mark') {
    v8.takeCoverage();
    process.send('marked');
  } else if (m === 'stop') {
    // An exit whatever the close did: the parent waits for it before it removes the walk's folder.
    gated.close(2000).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  }
});
process.send('ready');
