#!/usr/bin/env bash
# Builds the agent image with no registry at all: a base image imported from a root filesystem that holds
# this machine's `node` binary and the shared libraries `ldd` lists for it, then the agent on top of it
# (docker/Dockerfile.offline). The engine is the one the docker CLI talks to (DOCKER_HOST).
#
# Usage: docker/build-offline.sh [TAG]
#   TAG                 image to build (default gated-agent:latest, GATED_AGENT_IMAGE's default)
#   GATED_BASE_IMAGE    tag of the imported base (default gated-node-base:local)
#   GATED_AGENT_DIR     folder holding the agent (default agents/example of this checkout)
#   GATED_AGENT_FILE    the agent's entry file inside that folder (default agent.mjs)
# For a real agent built FROM node:20-slim on a machine that can pull images, see docker/Dockerfile.
set -euo pipefail

tag=${1:-gated-agent:latest}
base=${GATED_BASE_IMAGE:-gated-node-base:local}
here=$(cd "$(dirname "$0")" && pwd)
agent_dir=${GATED_AGENT_DIR:-$here/../agents/example}
agent_file=${GATED_AGENT_FILE:-agent.mjs}
node_bin=$(readlink -f "$(command -v node)")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/workspace" "$root/etc" "$root/app"
cp "$node_bin" "$root/usr/local/bin/node"
# Every library node links against, and the dynamic loader, at the same paths as on this machine.
for lib in $(ldd "$node_bin" | grep -o '/[^ ]*'); do
  cp --parents -L "$lib" "$root"
done
# A non-root user for the agent (the runtime picks the uid; the name only makes tools print nicely).
printf 'root:x:0:0:root:/root:/sbin/nologin\nagent:x:1000:1000:agent:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nagent:x:1000:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  - "$base" >/dev/null

DOCKER_BUILDKIT=0 docker build -q \
  -f "$here/Dockerfile.offline" \
  --build-arg "BASE=$base" \
  --build-arg "AGENT=$agent_file" \
  -t "$tag" "$agent_dir" >/dev/null
echo "$tag"
