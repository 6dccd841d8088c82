import { dirname, join, resolve } from 'node:path';
import { UsageError } from './errors.js';
import { channelsConfig, type ChannelsConfig } from './config-channels.js';
import { voiceConfig, type VoiceConfig } from './config-voice.js';
import { int, list, onOff, str, type Env } from './config-read.js';
import { checkTimeZone } from './schedule.js';
import { STREAM_BY_DEFAULT } from './platforms.js';

export { loadDotEnv } from './dotenv.js';
export type { EmailConfig, GithubAppConfig, MailSecurity, MailServer } from './config-channels.js';

/** Every setting of gated, resolved once from the environment (and .env). Documented in .env.example. */
/** The HTTP server's connection caps and timeouts (GATED_HTTP_MAX_CONNECTIONS … GATED_HTTP_IDLE_TIMEOUT_MS). */
export interface ConnectionLimits {
  /** Open connections in all; null: the default, 1,000 and never more than half the descriptor limit. */
  max: number | null;
  /** Open connections from one client address. */
  perAddress: number;
  /** A connection must have sent a whole request head within this (slowloris). */
  headersTimeoutMs: number;
  /** A whole request (head and body) must have arrived within this. */
  requestTimeoutMs: number;
  /** A keep-alive connection with no request in flight is closed after this. */
  keepAliveTimeoutMs: number;
  /** A socket with no traffic either way for this long is closed (SSE streams send a keep-alive every 15 s). */
  idleTimeoutMs: number;
}

export interface Config extends ChannelsConfig, VoiceConfig {
  db: string;
  groupsDir: string;
  pollMs: number;
  maxConcurrent: number;
  idleTimeoutMs: number;
  /**
   * The idle budget (GATED_IDLE_AGENTS_MAX): at most this many agents wait idle for a follow-up; beyond it
   * the longest idle are closed. null: no budget (each waits out its idle timeout).
   */
  idleAgentsMax: number | null;
  runTimeoutMs: number;
  runtime: 'docker' | 'process' | 'swarm';
  agentImage: string;
  agentCmd: string;
  /** GATED_PROCESS_USER: who process-runtime agents run as under a root gated (`uid:gid` or `root`). */
  processUser: string | undefined;
  dockerHost: string | undefined;
  /** DOCKER_TLS_VERIFY=1: talk to DOCKER_HOST over mutual TLS with the files in DOCKER_CERT_PATH. */
  dockerTlsVerify: boolean;
  dockerCertPath: string | undefined;
  /** Swarm: the port of every node's engine (same TLS settings), for attaching to the tasks it runs. */
  swarmNodePort: number | undefined;
  /** Swarm: services made ahead of their lanes' next runs, at most this many at once (0: none). */
  swarmSpares: number;
  /** Extra host paths a group may mount into its container (colon-separated GATED_MOUNT_ALLOW). */
  mountAllow: string[];
  httpPort: number;
  httpHost: string;
  adminToken: string | undefined;
  admins: string[];
  maxOutputBytes: number;
  /** Most bytes of one inbound message's text an agent is handed (the stored row keeps all of it). */
  maxInputBytes: number;
  /** Host names the HTTP server answers besides its bound address, localhost and 127.0.0.1. */
  httpHosts: string[];
  /** Largest inbound attachment downloaded into a group's folder (GATED_MAX_ATTACHMENT_BYTES). */
  maxAttachmentBytes: number;
  /**
   * Bounds on what web clients may cause (docs/SECURITY.md): open SSE streams in all
   * (GATED_SSE_MAX_STREAMS) and per client address (GATED_SSE_MAX_PER_ADDRESS), uploads in flight
   * (GATED_UPLOADS_MAX_CONCURRENT), upload bytes per client address per hour (GATED_UPLOAD_BYTES_PER_HOUR),
   * wrong admin tokens per client address per hour (GATED_LOGIN_FAILURES_PER_HOUR).
   */
  /**
   * Bounds on the HTTP server's connections (docs/SECURITY.md "Connections"): open connections in all
   * (GATED_HTTP_MAX_CONNECTIONS; null: 1,000 within half the descriptor limit) and per client address
   * (GATED_HTTP_MAX_PER_ADDRESS), and the header, request, keep-alive and idle timeouts.
   */
  connections: ConnectionLimits;
  clientCaps: {
    sseStreams: number;
    ssePerAddress: number;
    uploadsConcurrent: number;
    uploadBytesPerHour: number;
    loginFailuresPerHour: number;
  };
  /** Platforms in `stream` mode (drafts edited in place); the others are `batch` (GATED_STREAM_CHANNELS). */
  streamChannels: string[];
  /**
   * Secrets handed to every agent in its first stdin line (`secrets`), never in its env, image or mounts:
   * the values of the variables GATED_AGENT_SECRETS names (comma-separated), read from gated's environment.
   */
  agentSecrets: Record<string, string>;
  /**
   * Secrets for one group (and the groups below it) only, by folder: the `folder:NAME[=VAR]` entries of
   * GATED_AGENT_SECRETS. They join `agentSecrets` in that group's first stdin line, never another group's.
   */
  groupSecrets: Record<string, Record<string, string>>;
  /** Operator-owned configuration of each group: `<configDir>/<folder>/` (GATED_CONFIG_DIR, docs/AGENTS.md). */
  configDir: string;
  /**
   * The instance's key for tool call receipts (GATED_RECEIPT_KEY_FILE, default `receipts.key` beside the
   * database; docs/SECURITY.md, "Receipts"): made on first use, owner-only, never given to an agent.
   */
  receiptKeyFile: string;
  /** The model of groups on the Claude agent that name none (GATED_CLAUDE_MODEL); unset: the CLI's default. */
  claudeModel: string | undefined;
  /** The model of groups on the Codex agent that name none (GATED_CODEX_MODEL); unset: the CLI's default. */
  codexModel: string | undefined;
  /** The command of the Codex agent on the process runtime (GATED_CODEX_CMD). */
  codexCmd: string;
  /** The image of the Codex agent on container runtimes (GATED_CODEX_IMAGE). */
  codexImage: string;
  logLevel: string;
  /** IANA time zone cron tasks and zone-less `at` times are read in (GATED_TZ, default UTC). */
  tz: string;
  /** Runs in a row that end without answering a task before it is paused (GATED_TASK_MAX_FAILURES). */
  taskMaxFailures: number;
  /** Deepest delegate/escalate chain (GATED_MAX_DELEGATION_DEPTH); a deeper delegation is refused. */
  maxDelegationDepth: number;
  /**
   * Most hops (delegations and answers) of one delegation chain per originating message
   * (GATED_MAX_DELEGATION_HOPS); one more delegation is refused, one more answer kept `limited`.
   */
  maxDelegationHops: number;
  /** Shortest gap between due times of a task an agent schedules (GATED_TASK_MIN_INTERVAL_MS). */
  taskMinIntervalMs: number;
  /** Most active tasks a group's agent may have scheduled (GATED_TASKS_PER_GROUP). */
  tasksPerGroup: number;
  /** Most facts a group keeps (GATED_MEMORY_MAX_FACTS, docs/MEMORY.md). */
  memoryMaxFacts: number;
  /** Longest fact in bytes (GATED_MEMORY_MAX_FACT_BYTES). */
  memoryMaxFactBytes: number;
  /** Bytes of facts each turn's input carries at most (GATED_MEMORY_TURN_BYTES); 0 gives none. */
  memoryTurnBytes: number;
  /** The history indexer runs (GATED_HISTORY_INDEX, default on); off, history search finds nothing new. */
  historyIndex: boolean;
  /** Days of per-minute dashboard history kept (GATED_HISTORY_DAYS); 0 keeps none and writes none. */
  historyDays: number;
  /** The writes of one event-loop turn share one transaction (GATED_GROUP_COMMIT, default on; docs/QUEUE.md). */
  groupCommit: boolean;
  /** An undecided tool approval is denied ("no decision") after this long (GATED_APPROVAL_TIMEOUT_MS). */
  approvalTimeoutMs: number;
  /** Where OpenTelemetry traces go (OTLP over HTTP, JSON); undefined: tracing is off (docs/OPERATIONS.md). */
  traces: { url: string; serviceName: string } | undefined;
}

/**
 * GATED_AGENT_SECRETS: comma-separated entries `[folder:]NAME[=VAR]`. NAME is what the agent receives, VAR
 * the variable of gated's environment holding the value (default NAME). Without `folder:` the secret goes
 * to every agent; with it, only to that group's agents and those of the groups below it.
 */
function agentSecrets(env: Env): {
  all: Record<string, string>;
  byGroup: Record<string, Record<string, string>>;
} {
  const all: Record<string, string> = {};
  const byGroup: Record<string, Record<string, string>> = {};
  for (const entry of (str(env, 'GATED_AGENT_SECRETS') ?? '').split(',').map((s) => s.trim())) {
    if (!entry) continue;
    const m = /^(?:([a-z0-9_/-]+):)?([A-Za-z_][A-Za-z0-9_]*)(?:=([A-Za-z_][A-Za-z0-9_]*))?$/.exec(entry);
    if (!m) throw new UsageError(`GATED_AGENT_SECRETS: bad entry '${entry}' (want [folder:]NAME[=VAR])`);
    const [, folder, name, from] = m as unknown as [string, string | undefined, string, string | undefined];
    const variable = from ?? name;
    const value = env[variable];
    if (value === undefined || value === '')
      throw new UsageError(`GATED_AGENT_SECRETS names ${variable}, which is not set`);
    if (folder === undefined) all[name] = value;
    else (byGroup[folder] ??= {})[name] = value;
  }
  return { all, byGroup };
}

/** Resolves the configuration from an environment (process.env by default). */
export function loadConfig(env: Env = process.env): Config {
  const run = runSettings(env);
  const secrets = agentSecrets(env);
  return {
    db: resolve(str(env, 'GATED_DB') ?? './data/gated.db'),
    groupsDir: resolve(str(env, 'GATED_GROUPS_DIR') ?? './data/groups'),
    configDir: resolve(str(env, 'GATED_CONFIG_DIR') ?? './data/config'),
    receiptKeyFile: resolve(
      str(env, 'GATED_RECEIPT_KEY_FILE') ??
        join(dirname(resolve(str(env, 'GATED_DB') ?? './data/gated.db')), 'receipts.key'),
    ),
    pollMs: int(env, 'GATED_POLL_MS', 2000, 10),
    ...run,
    ...agentSettings(env),
    agentSecrets: secrets.all,
    groupSecrets: secrets.byGroup,
    ...httpSettings(env),
    streamChannels: list(env, 'GATED_STREAM_CHANNELS', STREAM_BY_DEFAULT.join(','), true).filter(
      (s) => s !== 'none',
    ),
    ...channelsConfig(env),
    ...voiceConfig(env),
    ...limitSettings(env),
    logLevel: str(env, 'GATED_LOG_LEVEL') ?? 'info',
    groupCommit: onOff(env, 'GATED_GROUP_COMMIT', true),
    historyIndex: onOff(env, 'GATED_HISTORY_INDEX', true),
    tz: checkTimeZone(str(env, 'GATED_TZ') ?? 'UTC'),
    ...retiredToolDefault(env),
    traces: tracesConfig(env),
  };
}

/** How runs are started and bounded: the runtime and its engine, the slots, the timeouts, the sizes. */
function runSettings(env: Env) {
  const runtime = str(env, 'GATED_RUNTIME') ?? 'process';
  if (runtime !== 'docker' && runtime !== 'process' && runtime !== 'swarm') {
    throw new UsageError(`GATED_RUNTIME must be 'docker', 'swarm' or 'process', got '${runtime}'`);
  }
  return {
    runtime,
    maxConcurrent: int(env, 'GATED_MAX_CONCURRENT', 5, 1),
    idleTimeoutMs: int(env, 'GATED_IDLE_TIMEOUT_MS', 30_000, 0),
    idleAgentsMax:
      str(env, 'GATED_IDLE_AGENTS_MAX') === undefined ? null : int(env, 'GATED_IDLE_AGENTS_MAX', 0, 0),
    runTimeoutMs: int(env, 'GATED_RUN_TIMEOUT_MS', 600_000, 1),
    dockerHost: str(env, 'DOCKER_HOST'),
    dockerTlsVerify: str(env, 'DOCKER_TLS_VERIFY') === '1',
    dockerCertPath: str(env, 'DOCKER_CERT_PATH'),
    swarmNodePort: str(env, 'GATED_SWARM_NODE_PORT') ? int(env, 'GATED_SWARM_NODE_PORT', 2376, 1) : undefined,
    swarmSpares: int(env, 'GATED_SWARM_SPARES', 8, 0),
    mountAllow: (str(env, 'GATED_MOUNT_ALLOW') ?? '').split(':').filter(Boolean),
    maxOutputBytes: int(env, 'GATED_MAX_OUTPUT_BYTES', 10 * 1024 * 1024, 1024),
    maxInputBytes: int(env, 'GATED_MAX_INPUT_BYTES', 256 * 1024, 1024),
    maxAttachmentBytes: int(env, 'GATED_MAX_ATTACHMENT_BYTES', 20 * 1024 * 1024, 0),
  } satisfies Partial<Config>;
}

/** Which agent a group runs when it names none: the commands, images and models of the bundled agents. */
function agentSettings(env: Env) {
  return {
    agentImage: str(env, 'GATED_AGENT_IMAGE') ?? 'gated-agent:latest',
    agentCmd: str(env, 'GATED_AGENT_CMD') ?? 'node "$GATED_HOME/agents/example/agent.mjs"',
    processUser: str(env, 'GATED_PROCESS_USER'),
    claudeModel: str(env, 'GATED_CLAUDE_MODEL'),
    codexModel: str(env, 'GATED_CODEX_MODEL'),
    codexCmd: str(env, 'GATED_CODEX_CMD') ?? 'node "$GATED_HOME/agents/codex/agent.mjs"',
    codexImage: str(env, 'GATED_CODEX_IMAGE') ?? 'gated-codex:latest',
  } satisfies Partial<Config>;
}

/** The HTTP server: where it listens, whom it answers, who administers it, and the bounds on its clients. */
function httpSettings(env: Env) {
  return {
    httpPort: int(env, 'GATED_HTTP_PORT', 8787, 0),
    httpHost: str(env, 'GATED_HTTP_HOST') ?? '127.0.0.1',
    httpHosts: list(env, 'GATED_HTTP_HOSTS', '', true),
    adminToken: str(env, 'GATED_ADMIN_TOKEN'),
    admins: list(env, 'GATED_ADMINS'),
    connections: {
      max: str(env, 'GATED_HTTP_MAX_CONNECTIONS') ? int(env, 'GATED_HTTP_MAX_CONNECTIONS', 1000, 1) : null,
      perAddress: int(env, 'GATED_HTTP_MAX_PER_ADDRESS', 64, 1),
      headersTimeoutMs: int(env, 'GATED_HTTP_HEADERS_TIMEOUT_MS', 10_000, 100),
      requestTimeoutMs: int(env, 'GATED_HTTP_REQUEST_TIMEOUT_MS', 120_000, 100),
      keepAliveTimeoutMs: int(env, 'GATED_HTTP_KEEPALIVE_TIMEOUT_MS', 5_000, 100),
      idleTimeoutMs: int(env, 'GATED_HTTP_IDLE_TIMEOUT_MS', 60_000, 1000),
    },
    clientCaps: {
      sseStreams: int(env, 'GATED_SSE_MAX_STREAMS', 200, 1),
      ssePerAddress: int(env, 'GATED_SSE_MAX_PER_ADDRESS', 20, 1),
      uploadsConcurrent: int(env, 'GATED_UPLOADS_MAX_CONCURRENT', 4, 1),
      uploadBytesPerHour: int(env, 'GATED_UPLOAD_BYTES_PER_HOUR', 200 * 1024 * 1024, 0),
      loginFailuresPerHour: int(env, 'GATED_LOGIN_FAILURES_PER_HOUR', 20, 1),
    },
  } satisfies Partial<Config>;
}

/** What agents may cause: tasks, delegation chains, tool approvals' wait, and the history kept. */
function limitSettings(env: Env) {
  return {
    taskMaxFailures: int(env, 'GATED_TASK_MAX_FAILURES', 5, 1),
    maxDelegationDepth: int(env, 'GATED_MAX_DELEGATION_DEPTH', 3, 0),
    maxDelegationHops: int(env, 'GATED_MAX_DELEGATION_HOPS', 20, 1),
    taskMinIntervalMs: int(env, 'GATED_TASK_MIN_INTERVAL_MS', 60_000, 1),
    tasksPerGroup: int(env, 'GATED_TASKS_PER_GROUP', 50, 1),
    historyDays: int(env, 'GATED_HISTORY_DAYS', 14, 0),
    memoryMaxFacts: int(env, 'GATED_MEMORY_MAX_FACTS', 1000, 1),
    memoryMaxFactBytes: int(env, 'GATED_MEMORY_MAX_FACT_BYTES', 2048, 16),
    memoryTurnBytes: int(env, 'GATED_MEMORY_TURN_BYTES', 4096, 0),
    approvalTimeoutMs: int(env, 'GATED_APPROVAL_TIMEOUT_MS', 600_000, 1),
  } satisfies Partial<Config>;
}

/**
 * The OTLP/HTTP traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else GATED_OTEL_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces` appended (the OpenTelemetry convention). None set: off.
 */
function tracesConfig(env: Env): Config['traces'] {
  const full = str(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseKey = str(env, 'GATED_OTEL_ENDPOINT') ? 'GATED_OTEL_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const base = str(env, baseKey);
  if (full === undefined && base === undefined) return undefined;
  const url = full ?? `${base!.replace(/\/+$/, '')}/v1/traces`;
  const key = full !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : baseKey;
  if (!/^https?:\/\/[^/]/.test(url)) throw new UsageError(`${key} must be an http(s) URL`);
  return { url, serviceName: str(env, 'OTEL_SERVICE_NAME') ?? 'gated' };
}

/**
 * GATED_TOOL_DEFAULT is retired: each group's autonomy decides what no tool rule does (docs/APPROVALS.md).
 * A setting that would be ignored is refused instead, so an operator who relied on `deny` is not silently
 * left with less.
 */
function retiredToolDefault(env: NodeJS.ProcessEnv): Record<string, never> {
  if (str(env, 'GATED_TOOL_DEFAULT') === undefined) return {};
  throw new UsageError(
    "GATED_TOOL_DEFAULT is retired: what no tool rule decides is decided by the group's autonomy; set it " +
      'with `gated groups autonomy FOLDER read_only|supervised|full` and remove GATED_TOOL_DEFAULT ' +
      '(docs/OPERATIONS.md, "Upgrading")',
  );
}
