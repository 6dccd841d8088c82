/** A voice.json that cannot be used, and why (core/group-config.ts reports it with the other files). */
interface ConfigProblem {
  file: string;
  reason: string;
}

/**
 * A group's voice settings, `voice.json` (docs/VOICE.md): `{"language": "en", "speak": true, "voice": "en-us"}`.
 * `language` is what the transcriber is told (undefined: its default); `speak` makes each reply also a spoken
 * file; `voice` is the text-to-speech voice (espeak-ng's `-v`; default the language).
 */
export interface VoiceSettings {
  language: string | undefined;
  speak: boolean;
  voice: string | undefined;
}

/** A language or voice name: letters, digits, `-`, `_` and `+` (espeak-ng's variants), at most 32. */
const VOICE_NAME = /^[A-Za-z0-9][A-Za-z0-9_+-]{0,31}$/;

/** Parses voice.json text: the settings, and a problem for what cannot be used (then left out). */
export function parseVoiceJson(
  text: string,
  file: string,
): { voice: VoiceSettings; problems: ConfigProblem[] } {
  const voice: VoiceSettings = { language: undefined, speak: false, voice: undefined };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return { voice, problems: [{ file, reason: `not valid JSON: ${(err as Error).message}` }] };
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    return { voice, problems: [{ file, reason: 'must be a JSON object' }] };
  const problems: ConfigProblem[] = [];
  const d = doc as Record<string, unknown>;
  for (const key of ['language', 'voice'] as const) {
    const v = d[key];
    if (v === undefined) continue;
    if (typeof v === 'string' && VOICE_NAME.test(v)) voice[key] = v;
    else problems.push({ file, reason: `"${key}" must be a name such as "en" (letters, digits, - _ +)` });
  }
  if (d.speak !== undefined) {
    if (typeof d.speak === 'boolean') voice.speak = d.speak;
    else problems.push({ file, reason: '"speak" must be true or false' });
  }
  for (const k of Object.keys(d))
    if (!['language', 'speak', 'voice'].includes(k)) problems.push({ file, reason: `unknown key "${k}"` });
  return { voice, problems };
}

/** No voice.json: nothing transcribed in a language of its own, nothing spoken. */
export const NO_VOICE: { voice: VoiceSettings; voiceFile: string | null } = {
  voice: { language: undefined, speak: false, voice: undefined },
  voiceFile: null,
};
