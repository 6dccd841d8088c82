#!/usr/bin/env bash
# Builds the image of gated with no registry at all, the way docker/build-offline.sh builds the agent image:
# a base imported from a root filesystem holding this machine's `node` binary, the shared libraries it (and
# any native module) links against, and gated's production dependencies copied from this checkout's
# node_modules; then docker/gated.Dockerfile.offline adds the compiled gated on top. The engine is the one
# the docker CLI talks to (DOCKER_HOST). On a machine that can pull images, use docker/gated.Dockerfile.
#
# Usage: docker/build-gated-offline.sh [TAG]
#   TAG                 image to build (default gated:latest)
#   GATED_RUNTIME_BASE  tag of the imported base (default gated-runtime-base:local)
#   GATED_DIST          a built dist/ to take as it is instead of checking the types and bundling (the tests
#                       pass the one scripts/dist.mjs keeps up to date, whose types `npm test` checks anyway)
set -euo pipefail

tag=${1:-gated:latest}
base=${GATED_RUNTIME_BASE:-gated-runtime-base:local}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
node_bin=$(readlink -f "$(command -v node)")
modules=$(readlink -f "$repo/node_modules")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
ctx=$work/context
mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/data" "$root/etc" "$root/app/node_modules" "$ctx/app"
cp "$node_bin" "$root/usr/local/bin/node"

# The first stage of gated.Dockerfile, done here: check the types and bundle, then take what runs.
if [ -n "${GATED_DIST:-}" ]; then
  cp -r "$GATED_DIST" "$ctx/app/dist"
  rm -rf "$ctx/app/dist/.start-manifest.json" "$ctx/app/dist/walk"
else
  (cd "$repo" && npx tsc --noEmit -p tsconfig.build.json && node scripts/dist.mjs --out "$ctx/app/dist")
fi
cp "$repo/package.json" "$repo/schema.sql" "$repo/routes.example.sql" "$ctx/app/"
cp -r "$repo/web" "$ctx/app/web"
mkdir -p "$ctx/app/agents"
cp -r "$repo/agents/example" "$ctx/app/agents/example"
# The files that run beside dist/ as they are (worker threads and helpers read through packageFile): every
# file of the source folders that the compiler does not compile.
(cd "$repo" && find core router store gateway queue channels delivery http gated -type f ! -name '*.ts' -print0) |
  while IFS= read -r -d '' f; do
    mkdir -p "$ctx/app/$(dirname "$f")"
    cp "$repo/$f" "$ctx/app/$f"
  done

# gated's production dependencies and everything they need, from the hoisted node_modules (the agents'
# SDKs are not among them: they run in the agent images, installed from agents/*/package-lock.json).
node - "$repo/package.json" "$modules" <<'JS' >"$work/deps"
const { existsSync, readdirSync, readFileSync } = require('node:fs');
const [pkgFile, modules] = process.argv.slice(2);
const seen = new Set();
const needs = (dir) => {
  const p = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8'));
  visit(p.dependencies);
  visit(p.optionalDependencies);
  visit(p.peerDependencies);
  // A package's own node_modules travels with it, but what those nested packages need may be hoisted.
  const nested = `${dir}/node_modules`;
  if (!existsSync(nested)) return;
  for (const entry of readdirSync(nested)) {
    const names = entry.startsWith('@') ? readdirSync(`${nested}/${entry}`).map((n) => `${entry}/${n}`) : [entry];
    for (const n of names) if (existsSync(`${nested}/${n}/package.json`)) needs(`${nested}/${n}`);
  }
};
const visit = (deps) => {
  for (const name of Object.keys(deps ?? {})) {
    if (seen.has(name) || !existsSync(`${modules}/${name}/package.json`)) continue;
    seen.add(name);
    needs(`${modules}/${name}`);
  }
};
visit(JSON.parse(readFileSync(pkgFile, 'utf8')).dependencies);
console.log([...seen].join('\n'));
JS
while read -r name; do
  [ -n "$name" ] || continue
  mkdir -p "$root/app/node_modules/$(dirname "$name")"
  cp -al "$modules/$name" "$root/app/node_modules/$name" 2>/dev/null ||
    cp -a "$modules/$name" "$root/app/node_modules/$name"
done <"$work/deps"

# git for groups bound to a repository (docs/WORKTREES.md), with the helpers it runs (git-core).
git_bin=$(readlink -f "$(command -v git)")
cp --parents -L "$git_bin" "$root"
[ "$git_bin" = /usr/bin/git ] || { mkdir -p "$root/usr/bin" && ln -sf "$git_bin" "$root/usr/bin/git"; }
git_core=$(git --exec-path)
mkdir -p "$root$git_core" && cp -a "$git_core/." "$root$git_core/"
# The libraries node, git and every native module (better-sqlite3) link against, at this machine's paths.
programs=("$node_bin" "$git_bin")
[ -e "$git_core/git-remote-http" ] && programs+=("$git_core/git-remote-http")
while IFS= read -r -d '' f; do programs+=("$f"); done < <(find "$root/app/node_modules" -name '*.node' -print0)
for prog in "${programs[@]}"; do
  for lib in $(ldd "$prog" 2>/dev/null | grep -o '/[^ ]*'); do
    cp --parents -L -n "$lib" "$root"
  done
done
# The unprivileged user gated runs as (uid 1000, as the node images' `node` user).
printf 'root:x:0:0:root:/root:/sbin/nologin\ngated:x:1000:1000:gated:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\ngated:x:1000:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
chown 1000:1000 "$root/data"

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  - "$base" >/dev/null

DOCKER_BUILDKIT=0 docker build -q \
  -f "$here/gated.Dockerfile.offline" \
  --build-arg "BASE=$base" \
  -t "$tag" "$ctx" >/dev/null
echo "$tag"
