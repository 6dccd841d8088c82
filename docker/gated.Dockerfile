# The image of gated itself (docs/DEPLOY.md). Build it from the repository root on a machine that can pull
# images and reach the npm registry:
#
#   docker build -f docker/gated.Dockerfile -t gated:latest .
#
# Two stages: the first installs every dependency (better-sqlite3 compiles here when no prebuilt binary
# fits), checks the types and bundles gated's modules (scripts/dist.mjs); the second holds only what runs: dist/, the production dependencies,
# schema.sql, the web UI and the example agent. It runs as the unprivileged `node` user (uid 1000) and says
# whether it is healthy through /healthz. The agents' SDKs (Claude, Codex) are not gated's dependencies:
# they live in agents/claude and agents/codex and run inside the agent images.
#
# Offline machines (tests, this repository's CI) build the same layout with docker/build-gated-offline.sh.
ARG BUILD_BASE=node:20
ARG BASE=node:20-slim

FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json schema.sql ./
COPY scripts/dist.mjs scripts/
COPY core core
COPY router router
COPY worktrees worktrees
COPY store store
COPY gateway gateway
COPY queue queue
COPY channels channels
COPY voice voice
COPY delivery delivery
COPY http http
COPY gated gated
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund

FROM ${BASE}
# git for groups bound to a repository (docs/WORKTREES.md): gated clones and makes the topics' worktrees.
RUN apt-get update \
  && apt-get install -y --no-install-recommends git ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist dist
COPY package.json schema.sql routes.example.sql ./
COPY web web
COPY agents/example agents/example
# The files that run beside dist/ as they are (worker threads and helpers read through packageFile):
COPY store/checkpoint-worker.mjs store/
COPY queue/runtime/spawner.mjs queue/runtime/
# Everything lives under /data unless configured otherwise; mount a volume there (docker/compose.yaml).
ENV NODE_ENV=production \
    GATED_DB=/data/gated.db \
    GATED_GROUPS_DIR=/data/groups \
    GATED_HTTP_HOST=0.0.0.0 \
    GATED_HTTP_PORT=8787
EXPOSE 8787
USER 1000:1000
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.GATED_HTTP_PORT||8787)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "/app/dist/gated/cli.js"]
CMD ["run"]
