#!/usr/bin/env bash
# Installs Debian's chromium for the browser test (test/web/browser.test.ts drives it with playwright-core).
# Idempotent: does nothing when /usr/bin/chromium already runs. Never downloads a browser build of its own.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

if [ -x /usr/bin/chromium ] && /usr/bin/chromium --version >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "40-chromium: chromium is missing and this script is not root; run: apt-get install -y chromium" >&2
  exit 1
fi

apt_install chromium fonts-dejavu-core
/usr/bin/chromium --version
