import { spawn } from 'node:child_process';

/**
 * The programs voice runs (docs/VOICE.md): ffprobe for a file's length, ffmpeg to convert, and any command an
 * operator names. Each runs without a shell unless the operator's own command line needs one, with a bounded
 * output, a timeout, and an environment that holds none of gated's secrets.
 */

/** A program that failed: its name, how it ended, and the tail of what it printed on stderr. */
export class CommandFailed extends Error {
  override readonly name = 'CommandFailed';
  constructor(
    readonly program: string,
    readonly how: string,
    readonly stderr: string,
  ) {
    super(`${program} ${how}${stderr ? `: ${stderr}` : ''}`);
  }
}

/** What one run of a program needs besides its name and arguments. */
export interface RunOptions {
  /** Written to its stdin, then stdin is closed (default: nothing). */
  input?: string;
  /** Killed (SIGKILL) after this many ms. */
  timeoutMs: number;
  /** Variables added to the minimal environment (PATH, HOME, LANG, TMPDIR). */
  env?: Record<string, string>;
  /** Most bytes of stdout kept (more is an error). Default 1 MiB. */
  maxStdout?: number;
  cwd?: string;
}

/** The environment a voice program sees: enough to find programs and locales, none of gated's settings. */
export function minimalEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR']) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  return { ...env, ...extra };
}

/** Runs `program args…`; resolves with its stdout when it exits 0, else throws CommandFailed. */
export function runProgram(program: string, args: readonly string[], opts: RunOptions): Promise<string> {
  const maxStdout = opts.maxStdout ?? 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      env: minimalEnv(opts.env),
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let failure: string | undefined;
    const timer = setTimeout(() => {
      failure = `took longer than ${opts.timeoutMs} ms`;
      child.kill('SIGKILL');
    }, opts.timeoutMs);
    child.stdout.on('data', (b: Buffer) => {
      outBytes += b.length;
      if (outBytes > maxStdout) {
        failure = `printed more than ${maxStdout} bytes`;
        child.kill('SIGKILL');
      } else out.push(b);
    });
    child.stderr.on('data', (b: Buffer) => {
      err = (err + b.toString('utf8')).slice(-2000);
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new CommandFailed(program, `could not start (${e.message})`, ''));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const tail = lastLine(err);
      if (failure) return reject(new CommandFailed(program, failure, tail));
      if (code !== 0) return reject(new CommandFailed(program, `exited ${code ?? signal}`, tail));
      resolve(Buffer.concat(out).toString('utf8'));
    });
    child.stdin.on('error', () => {}); // a program that does not read its stdin
    child.stdin.end(opts.input ?? '');
  });
}

/** The last non-empty line of a program's stderr, bounded: what a log line or a note can say of it. */
function lastLine(text: string): string {
  const lines = text.split('\n').map((l) => l.trim());
  return (lines.filter(Boolean).pop() ?? '').slice(0, 300);
}

/** An audio file ffprobe cannot read (not audio, or damaged). */
export class NotAudio extends Error {
  override readonly name = 'NotAudio';
}

/** The length of an audio or video file in seconds (ffprobe), or NotAudio when it has no audio stream. */
export async function durationOf(file: string, timeoutMs = 30_000): Promise<number> {
  let out: string;
  try {
    out = await runProgram(
      'ffprobe',
      [
        '-v',
        'error',
        '-select_streams',
        'a:0',
        '-show_entries',
        'format=duration:stream=codec_type',
        '-of',
        'json',
        file,
      ],
      { timeoutMs },
    );
  } catch (err) {
    if (err instanceof CommandFailed && err.how.startsWith('exited'))
      throw new NotAudio(`not readable as audio (${err.stderr || err.how})`);
    throw err;
  }
  const info = JSON.parse(out) as { streams?: unknown[]; format?: { duration?: string } };
  if (!info.streams?.length) throw new NotAudio('has no audio stream');
  const s = Number(info.format?.duration);
  if (!Number.isFinite(s)) throw new NotAudio('has no duration');
  return s;
}

/** Runs ffmpeg on `input` as mono audio at `rate` Hz with the encoder arguments `encode`, into `output`. */
async function ffmpegMono(input: string, output: string, rate: string, encode: string[], timeoutMs: number) {
  await runProgram(
    'ffmpeg',
    ['-nostdin', '-v', 'error', '-y', '-i', input, '-vn', '-ac', '1', '-ar', rate, ...encode, output],
    { timeoutMs },
  );
}

/** Converts any audio ffmpeg reads into 16 kHz mono 16-bit WAV, what speech recognisers expect. */
export async function toWav16k(input: string, output: string, timeoutMs: number): Promise<void> {
  await ffmpegMono(input, output, '16000', ['-c:a', 'pcm_s16le', '-f', 'wav'], timeoutMs);
}

/**
 * Encodes audio as an Ogg/Opus voice note (mono, 48 kHz, 32 kb/s: what Telegram's own voice notes are), the
 * file a platform plays as a voice message.
 */
export async function toVoiceNote(input: string, output: string, timeoutMs: number): Promise<void> {
  const opus = ['-c:a', 'libopus', '-b:a', '32k', '-application', 'voip', '-f', 'ogg'];
  await ffmpegMono(input, output, '48000', opus, timeoutMs);
}

/** `1 h 2 min`, `3 min 5 s`, `42 s`: a length as a note says it. */
export function spokenLength(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) return `${h} h${m ? ` ${m} min` : ''}`;
  if (m > 0) return `${m} min${r ? ` ${r} s` : ''}`;
  return `${r} s`;
}
