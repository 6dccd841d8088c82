#!/usr/bin/env bash
# Installs the voice tools (docs/VOICE.md): Debian's pocketsphinx with its US English model (the local
# default transcriber), ffmpeg (conversion to 16 kHz mono WAV and to OGG/Opus voice notes, ffprobe for a
# file's duration) and espeak-ng (the default text-to-speech command). The voice tests speak a sentence with
# espeak-ng and transcribe it with pocketsphinx. Idempotent: does nothing when all four are present.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

have() {
  command -v pocketsphinx_continuous >/dev/null 2>&1 &&
    command -v ffmpeg >/dev/null 2>&1 &&
    command -v ffprobe >/dev/null 2>&1 &&
    command -v espeak-ng >/dev/null 2>&1 &&
    [ -d /usr/share/pocketsphinx/model/en-us/en-us ]
}

if have; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "55-voice.sh: root is needed to install pocketsphinx, pocketsphinx-en-us, ffmpeg and espeak-ng" >&2
  exit 1
fi
apt_install \
  pocketsphinx pocketsphinx-en-us ffmpeg espeak-ng >/dev/null
have
echo "55-voice.sh: pocketsphinx, pocketsphinx-en-us, ffmpeg and espeak-ng installed"
