/**
 * Real speech for the voice tests: espeak-ng speaks a sentence into a WAV file and ffmpeg makes it an
 * Ogg/Opus voice note (voice/audio.ts, the encoder spoken replies use). "please check the weather tomorrow"
 * is a sentence Debian's pocketsphinx hears right from espeak-ng's voice (checked word for word while the
 * tests were written); other sentences come back garbled, so tests assert on its words.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { toVoiceNote } from '../../voice/audio.js';
import { tempDir } from '../helpers/db.js';

/** The sentence, and the words a test may expect to find in its transcript. */
export const SENTENCE = 'please check the weather tomorrow';
export const KEY_WORDS = ['check', 'weather', 'tomorrow'];

/** `text` spoken by espeak-ng, as an Ogg/Opus voice note. */
export async function voiceNote(text = SENTENCE): Promise<Buffer> {
  const dir = tempDir();
  const wav = join(dir, 'speech.wav');
  execFileSync('espeak-ng', ['-w', wav, text]);
  const ogg = join(dir, 'speech.ogg');
  await toVoiceNote(wav, ogg, 30_000);
  return readFileSync(ogg);
}

/**
 * Silence of `seconds` as an Ogg/Opus file: ten seconds encoded, then looped by stream copy (encoding two
 * hours would take minutes; copying packets takes under a second). Two hours are about 2 MB.
 */
export function silence(seconds: number): Buffer {
  const dir = tempDir();
  const short = join(dir, 'ten.ogg');
  const ogg = join(dir, 'silence.ogg');
  const ff = (args: string[]) => execFileSync('ffmpeg', ['-nostdin', '-v', 'error', '-y', ...args]);
  ff(
    ['-f', 'lavfi', '-i', 'anullsrc=r=8000:cl=mono', '-t', '10', '-c:a', 'libopus', '-b:a', '6k'].concat([
      '-frame_duration',
      '60',
      '-f',
      'ogg',
      short,
    ]),
  );
  ff(['-stream_loop', '-1', '-i', short, '-t', String(seconds), '-c', 'copy', '-f', 'ogg', ogg]);
  return readFileSync(ogg);
}
