#!/usr/bin/env bash
# Installs a colour emoji font (Debian fonts-noto-color-emoji) so Chromium draws emoji in the web UI tests
# and the screenshots in docs/ instead of empty boxes (test/web/emoji.test.ts checks it). Idempotent: does
# nothing when fontconfig already knows a colour emoji font.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

if fc-list :color=true family 2>/dev/null | grep -qi emoji; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "45-emoji-font.sh: root is needed to install fonts-noto-color-emoji" >&2
  exit 1
fi
apt_install fonts-noto-color-emoji fontconfig
fc-list :color=true family | grep -qi emoji
echo "45-emoji-font.sh: fonts-noto-color-emoji installed"
