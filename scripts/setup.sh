#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, idempotently: each scripts/setup.d/*.sh
# checks before it installs, so a second run takes a second or two. Run as root (CI is root) or with sudo
# rights. Two lanes run at once, each step after the other within its lane: the Debian packages (apt, one
# dpkg at a time anyway; the package lists fetched once, scripts/setup-apt.sh) and the npm installs of the
# agents and the atproto network (the steps named *.npm.sh). Each line is prefixed by its step, and a
# failing step is named at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

GATED_SETUP_APT_STAMP=$(mktemp -u "${TMPDIR:-/tmp}/gated-setup-apt.XXXXXX")
export GATED_SETUP_APT_STAMP
trap 'rm -f "$GATED_SETUP_APT_STAMP"' EXIT

# lane STEP...: runs the steps in order, each line of their output prefixed by the step's name; stops at
# the first that fails and prints its name on fd 3.
lane() {
  local step
  for step in "$@"; do
    local name
    name=$(basename "$step" .sh)
    if ! bash "$step" 2>&1 | sed -u "s/^/setup: $name: /"; then
      echo "$name" >&3
      return 1
    fi
  done
}

apt_steps=()
npm_steps=()
for step in scripts/setup.d/*.sh; do
  case $step in
    *.npm.sh) npm_steps+=("$step") ;;
    *) apt_steps+=("$step") ;;
  esac
done

failed=$(mktemp "${TMPDIR:-/tmp}/gated-setup-failed.XXXXXX")
trap 'rm -f "$GATED_SETUP_APT_STAMP" "$failed"' EXIT
lane "${apt_steps[@]}" 3>>"$failed" &
apt_lane=$!
lane "${npm_steps[@]}" 3>>"$failed" &
npm_lane=$!
status=0
wait "$apt_lane" || status=1
wait "$npm_lane" || status=1
if [ "$status" -ne 0 ]; then
  echo "setup: failed: $(tr "\n" " " <"$failed")" >&2
  exit 1
fi
