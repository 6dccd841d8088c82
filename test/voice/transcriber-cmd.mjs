// A transcriber command a test controls (GATED_TRANSCRIBE_CMD='node …/transcriber-cmd.mjs <control dir>'; gated
// appends the audio file's path). Each call appends a line to <dir>/calls (the path, then the group's language
// from GATED_TRANSCRIBE_LANGUAGE or `-`); <dir>/mode says what it does:
// - `print <text>`: prints the text (the transcript);
// - `fail`: exits 1 with "model not loaded" on stderr;
// - `hang-once <text>`: the first call writes its pid to <dir>/hung and waits forever (until killed); later
//   calls print the text.
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, audio] = process.argv.slice(2);
appendFileSync(join(dir, 'calls'), `${audio} ${process.env.GATED_TRANSCRIBE_LANGUAGE ?? '-'}\n`);
const mode = readFileSync(join(dir, 'mode'), 'utf8').trim();
const [verb, ...rest] = mode.split(' ');
const text = rest.join(' ');
if (verb === 'print') process.stdout.write(`${text}\n`);
else if (verb === 'fail') {
  process.stderr.write('model not loaded\n');
  process.exit(1);
} else if (verb === 'hang-once') {
  if (existsSync(join(dir, 'hung'))) process.stdout.write(`${text}\n`);
  else {
    writeFileSync(join(dir, 'hung'), String(process.pid));
    setInterval(() => {}, 60_000);
  }
}
