// A text-to-speech command a test controls (GATED_TTS_CMD='node …/tts-cmd.mjs <control dir>'; gated appends
// the file to write). Each call appends a JSON line to <dir>/calls: the text it read on stdin, GATED_TTS_VOICE,
// and whether a secret of gated's environment reached it. <dir>/mode says what it does:
// - `speak`: espeak-ng speaks the text into the file (a WAV, which gated converts);
// - `fail`: exits 1 with "no voice installed" on stderr, writing nothing.
import { execFileSync } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, out] = process.argv.slice(2);
const text = readFileSync(0, 'utf8');
const leaked = Object.keys(process.env).filter((k) => /TOKEN|KEY|SECRET/.test(k));
appendFileSync(
  join(dir, 'calls'),
  `${JSON.stringify({ text, voice: process.env.GATED_TTS_VOICE ?? null, leaked })}\n`,
);
if (readFileSync(join(dir, 'mode'), 'utf8').trim() === 'fail') {
  process.stderr.write('no voice installed\n');
  process.exit(1);
}
execFileSync('espeak-ng', ['-w', out, text]);
