import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { runProgram, toVoiceNote } from './audio.js';

/**
 * Text to speech for spoken replies (docs/VOICE.md): a local command speaks the text into a file and ffmpeg
 * makes it an Ogg/Opus voice note, the file every platform plays. `espeak-ng` (the default) is built in;
 * another command gets the text on stdin and the file to write as its last argument (any format ffmpeg
 * reads), GATED_TTS_VOICE set when the group names a voice or a language, and none of gated's environment.
 */

/** What speaking one reply needs. */
export interface SpeakRequest {
  text: string;
  /**
   * A group's voice.json `voice`, else its `language`: espeak-ng's `-v`, another command's GATED_TTS_VOICE;
   * undefined: the default voice.
   */
  voice: string | undefined;
  timeoutMs: number;
  /** A folder of gated's own for the intermediate file; removed after. */
  tmpRoot: string;
}

/** Most characters of a reply spoken: a longer one is cut at a sentence (about three minutes of speech). */
export const MAX_SPOKEN = 3000;

/** The reply as words to say: Markdown marks, links' targets and code blocks left out, bounded. */
export function speakable(markdown: string): string {
  const text = markdown
    .replace(/```[\s\S]*?(```|$)/g, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/https?:\/\/\S+/g, ' ')
    .replace(/[*_`#>|~]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (text.length <= MAX_SPOKEN) return text;
  const cut = text.slice(0, MAX_SPOKEN);
  const end = Math.max(cut.lastIndexOf('. '), cut.lastIndexOf('? '), cut.lastIndexOf('! '));
  return end > MAX_SPOKEN / 2 ? cut.slice(0, end + 1) : cut;
}

/** Speaks `req.text` with `command` and returns the Ogg/Opus voice note. */
export async function speak(command: string, req: SpeakRequest): Promise<Buffer> {
  const dir = await mkdtemp(join(req.tmpRoot, 'speak-'));
  try {
    const raw = join(dir, command === 'espeak-ng' ? 'speech.wav' : 'speech.out');
    if (command === 'espeak-ng') {
      const voice = req.voice ? ['-v', req.voice] : [];
      await runProgram('espeak-ng', [...voice, '--stdin', '-w', raw], {
        input: req.text,
        timeoutMs: req.timeoutMs,
      });
    } else {
      await runProgram('sh', ['-c', `${command} "$@"`, 'sh', raw], {
        input: req.text,
        timeoutMs: req.timeoutMs,
        env: req.voice ? { GATED_TTS_VOICE: req.voice } : {},
      });
    }
    const ogg = join(dir, 'reply.ogg');
    await toVoiceNote(raw, ogg, req.timeoutMs);
    return await readFile(ogg);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** How long one reply may take to speak before its text goes out alone. */
const SPEAK_TIMEOUT_MS = 60_000;

/** The speaker of one gated (GATED_TTS_CMD), its intermediate files in a folder of gated's own. */
export class Speaker {
  constructor(
    private readonly command: string,
    /** Made on first use (beside the database, never a group's folder). */
    private readonly tmpRoot: string,
  ) {}

  /** `text` spoken with `voice` (undefined: the default) as an Ogg/Opus voice note. */
  async speak(text: string, voice: string | undefined): Promise<Buffer> {
    await mkdir(this.tmpRoot, { recursive: true });
    return speak(this.command, { text, voice, timeoutMs: SPEAK_TIMEOUT_MS, tmpRoot: this.tmpRoot });
  }
}
