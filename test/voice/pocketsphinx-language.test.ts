/**
 * The group's language and the local default (docs/VOICE.md): pocketsphinx takes the model of the group's
 * language when its package is installed, and US English otherwise. The models folder is the test's: a
 * language whose model files are there is run with them (here files pocketsphinx cannot load, so the
 * attempt fails, which shows they were the ones given), and a language without one is heard in English.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, beforeEach, expect, it } from 'vitest';
import { pocketsphinxTranscriber, TranscribeError } from '../../voice/transcribers.js';
import { tempDir } from '../helpers/db.js';
import { KEY_WORDS, voiceNote } from './speech.js';

let note: Buffer;
let file: string;
let models: string;

beforeAll(async () => {
  note = await voiceNote();
}, 60_000);

// tempDir's folders go after each test: each gets its own.
beforeEach(() => {
  file = join(tempDir(), 'voice.ogg');
  writeFileSync(file, note);
  models = tempDir();
  // A "German" model package as Debian lays one out, with files that are no model at all.
  mkdirSync(join(models, 'de', 'de'), { recursive: true });
  writeFileSync(join(models, 'de', 'de.lm.bin'), 'not a language model');
  writeFileSync(join(models, 'de', 'cmudict-de.dict'), 'not a dictionary');
});

const transcribe = (language: string | undefined) =>
  pocketsphinxTranscriber(async () => tempDir(), models).transcribe({
    file,
    mime: 'audio/ogg',
    language,
    timeoutMs: 30_000,
  });

// One transcription a case: on a loaded machine pocketsphinx takes seconds of CPU each.
it.each([
  ['no language', undefined],
  ['en', 'en'],
  ['fr', 'fr'],
  ['pt-BR', 'pt-BR'],
])(
  'a language without an installed model, or English, is heard with the US English model (%s)',
  async (_, language) => {
    const words = await transcribe(language);
    for (const w of KEY_WORDS) expect(words).toContain(w);
  },
  180_000,
);

it("a language whose model is installed is run with that model's files", async () => {
  const err = await transcribe('de').then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TranscribeError);
  expect((err as TranscribeError).message).toMatch(/pocketsphinx_continuous/);
  // A name that is not a language never reaches the file system as a path.
  const words = await transcribe('../de');
  for (const w of KEY_WORDS) expect(words).toContain(w);
}, 180_000);
