/**
 * Voice (docs/VOICE.md): how long the local default transcriber takes per second of audio. espeak-ng speaks
 * the tests' sentence 1, 5 and 15 times in a row, ffmpeg makes each an Ogg/Opus voice note (as a Telegram
 * client would send it), and the built-in pocketsphinx transcriber (ffmpeg to 16 kHz WAV, then
 * pocketsphinx_continuous, each a process of its own) turns it into words, `rounds` times each. Prints the
 * median wall time, the time per second of audio, and the load of the machine while it ran.
 *
 *   npx tsx bench/voice.ts [rounds]     # about a minute with 3 rounds
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { durationOf, toVoiceNote } from '../voice/audio.js';
import { pocketsphinxTranscriber } from '../voice/transcribers.js';

const SENTENCE = 'please check the weather tomorrow.';
const rounds = Number(process.argv[2] ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'gated-bench-voice-'));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

try {
  const transcriber = pocketsphinxTranscriber(async () => mkdtempSync(join(dir, 't-')));
  console.log(`voice: pocketsphinx (local default), ${rounds} rounds, ${cpus().length} cores`);
  console.log(
    `load before: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log('| audio (s) | median (ms) | ms per s of audio | real-time factor | key words heard |');
  console.log('|---|---|---|---|---|');
  for (const times of [1, 5, 15]) {
    const wav = join(dir, `s${times}.wav`);
    const ogg = join(dir, `s${times}.ogg`);
    execFileSync('espeak-ng', ['-w', wav, Array(times).fill(SENTENCE).join(' ')]);
    await toVoiceNote(wav, ogg, 60_000);
    const seconds = await durationOf(ogg);
    const took: number[] = [];
    let words = '';
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      words = await transcriber.transcribe({
        file: ogg,
        mime: 'audio/ogg',
        language: undefined,
        timeoutMs: 300_000,
      });
      took.push(performance.now() - t0);
    }
    const m = median(took);
    const heard = ['check', 'weather', 'tomorrow'].filter((w) => words.includes(w)).length;
    console.log(
      `| ${seconds.toFixed(1)} | ${m.toFixed(0)} | ${(m / seconds).toFixed(0)} | ${(m / 1000 / seconds).toFixed(2)} | ${heard}/3 |`,
    );
  }
  console.log(
    `load after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
