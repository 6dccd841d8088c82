#!/usr/bin/env bash
# Builds the agent image with no registry at all: a base image imported from a root filesystem that holds
# this machine's `node` binary and the shared libraries `ldd` lists for it, then the agent on top of it
# (docker/Dockerfile.offline). The engine is the one the docker CLI talks to (DOCKER_HOST).
#
# An agent folder with a package.json (agents/claude, agents/codex) gets its dependencies too: the packages
# it names and everything they need, copied from the folder's own node_modules (`npm run agents:install`
# puts them there for the bundled agents; an agent folder without one uses this checkout's node_modules),
# plus the shared libraries of any native program among them (the Claude Code CLI). The production images
# install the same dependencies from the registry instead (docker/Dockerfile, agents/*/Dockerfile).
#
# Usage: docker/build-offline.sh [TAG]
#   TAG                 image to build (default gated-agent:latest, GATED_AGENT_IMAGE's default)
#   GATED_BASE_IMAGE    tag of the imported base (default gated-node-base:local)
#   GATED_AGENT_DIR     folder holding the agent (default agents/example of this checkout)
#   GATED_AGENT_FILE    the agent's entry file inside that folder (default agent.mjs)
#   GATED_AGENT_PROGRAMS  programs of this machine the agent runs, by name, space-separated (a test agent's
#                       `mkfifo`, the Claude agent's shell: `bash sh sleep`); each is copied at its own path,
#                       with its shared libraries, and found by its name where this machine finds it (sh is
#                       a link to dash here); a /bin that links to usr/bin here does so in the image too
#   GATED_AGENT_ENV     settings of the image's environment, space-separated NAME=VALUE (the Claude agent's
#                       GATED_CLAUDE_SHELL=1, which its production image sets too)
# For a real agent built FROM node:20-slim on a machine that can pull images, see docker/Dockerfile.
set -euo pipefail

tag=${1:-gated-agent:latest}
base=${GATED_BASE_IMAGE:-gated-node-base:local}
here=$(cd "$(dirname "$0")" && pwd)
agent_dir=${GATED_AGENT_DIR:-$here/../agents/example}
agent_file=${GATED_AGENT_FILE:-agent.mjs}
node_bin=$(readlink -f "$(command -v node)")
if [ -d "$agent_dir/node_modules" ]; then
  modules=$(readlink -f "$agent_dir/node_modules")
else
  modules=$(readlink -f "$here/../node_modules")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
ctx=$work/context
mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/workspace" "$root/etc" "$root/app/node_modules" "$ctx"
cp "$node_bin" "$root/usr/local/bin/node"
cp "$agent_dir/$agent_file" "$ctx/agent.mjs"
# The entry's sibling modules (agents/claude/actions.mjs), which it imports by relative path, and its
# sibling scripts (agents/codex/codex-cli.sh, which starts the Codex CLI), as the production images copy.
for f in "$agent_dir"/*.mjs "$agent_dir"/*.sh; do
  [ -e "$f" ] || continue
  [ "$(basename "$f")" = "$agent_file" ] || [ "$(basename "$f")" = agent.mjs ] || cp -p "$f" "$ctx/"
done

# The dependency closure of the agent's package.json, as package names, from the hoisted node_modules.
if [ -f "$agent_dir/package.json" ]; then
  node - "$agent_dir/package.json" "$modules" <<'JS' >"$work/deps"
const { existsSync, readFileSync } = require('node:fs');
const [pkgFile, modules] = process.argv.slice(2);
const seen = new Set();
const wanted = JSON.parse(readFileSync(pkgFile, 'utf8')).dependencies ?? {};
const missing = Object.keys(wanted).filter((name) => !existsSync(`${modules}/${name}/package.json`));
if (missing.length > 0) {
  console.error(`build-offline: ${missing.join(', ')} not installed in ${modules}: run npm run agents:install`);
  process.exit(1);
}
const visit = (deps) => {
  for (const name of Object.keys(deps ?? {})) {
    // An optional dependency for another platform is absent: nothing to copy.
    if (seen.has(name) || !existsSync(`${modules}/${name}/package.json`)) continue;
    seen.add(name);
    const p = JSON.parse(readFileSync(`${modules}/${name}/package.json`, 'utf8'));
    visit(p.dependencies);
    visit(p.optionalDependencies);
    visit(p.peerDependencies);
  }
};
visit(wanted);
console.log([...seen].join('\n'));
JS
  # Into the imported root filesystem rather than the build context: hundreds of MB are then packed once,
  # not sent, unpacked and committed again by a build step. Hard links when on the same filesystem.
  while read -r name; do
    [ -n "$name" ] || continue
    mkdir -p "$root/app/node_modules/$(dirname "$name")"
    cp -al "$modules/$name" "$root/app/node_modules/$name" 2>/dev/null ||
      cp -a "$modules/$name" "$root/app/node_modules/$name"
  done <"$work/deps"
fi

# Every library node (and any native program the agent brought) links against, and the dynamic loader, at
# the same paths as on this machine.
programs=("$node_bin")
# This machine's merged /usr: /bin (and /sbin, /lib, /lib64) as links into usr/, so that /bin/sh is found.
for d in bin sbin lib lib64; do
  if [ -L "/$d" ]; then
    mkdir -p "$root/$(readlink "/$d")"
    ln -sfn "$(readlink "/$d")" "$root/$d"
  fi
done
for name in ${GATED_AGENT_PROGRAMS:-}; do
  found=$(command -v "$name") || { echo "no program $name on this machine" >&2; exit 1; }
  prog=$(readlink -f "$found")
  cp --parents "$prog" "$root"
  # The name it is run by, where it differs from the file (sh -> dash), as the same link.
  at=$(readlink -f "$(dirname "$found")")/$(basename "$found")
  [ "$at" = "$prog" ] || ln -sf "$prog" "$root$at"
  programs+=("$prog")
done
while IFS= read -r -d '' f; do
  if ldd "$f" >/dev/null 2>&1; then programs+=("$f"); fi
done < <(find "$root/app/node_modules" -type f -perm -u+x -size +1M -print0)
for prog in "${programs[@]}"; do
  for lib in $(ldd "$prog" | grep -o '/[^ ]*'); do
    cp --parents -L -n "$lib" "$root"
  done
done
# A non-root user for the agent (the runtime picks the uid; the name only makes tools print nicely).
printf 'root:x:0:0:root:/root:/sbin/nologin\nagent:x:1000:1000:agent:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nagent:x:1000:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"

changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'ENV LANG=C.UTF-8')
for setting in ${GATED_AGENT_ENV:-}; do
  case $setting in
    [A-Za-z_]*=*) changes+=(--change "ENV $setting") ;;
    *) echo "GATED_AGENT_ENV: '$setting' is not NAME=VALUE" >&2; exit 1 ;;
  esac
done
tar -C "$root" -c . | docker import "${changes[@]}" - "$base" >/dev/null

DOCKER_BUILDKIT=0 docker build -q \
  -f "$here/Dockerfile.offline" \
  --build-arg "BASE=$base" \
  -t "$tag" "$ctx" >/dev/null
echo "$tag"
