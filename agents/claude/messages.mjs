// What each message the Claude Agent SDK yields means to a turn (docs/AGENTS.md, "How a turn ends"). Every
// member of the SDK's `SDKMessage` union (sdk.d.ts of @anthropic-ai/claude-agent-sdk 0.3.330), plus the
// frames its CLI sends outside that union (`command_lifecycle`, `keep_alive`, `turn_starting`), is named
// here on purpose, so that nothing the CLI says by the way is taken for a turn still at work:
//
// - `result`: a turn of the CLI ended (it names the user messages it answered);
// - `state`: the session went `idle` (the authoritative end of the CLI's work), `running` or
//   `requires_action` (a tool's permission is asked);
// - `lifecycle`: a user message of ours was queued, started, completed or cancelled;
// - `init`, `compacted`: the session started, its context was compacted;
// - `work`: the CLI is at work on the turn (the model streams, a tool runs or reports, a hook runs);
// - `info`: said by the way (rate limits, notices, suggestions, summaries): it changes nothing.
//
// A message of a type not listed is `unknown`: logged once and treated as `info`, so it can neither hold a
// turn open nor keep a stalled one alive.

/** Classes of `system` messages, by subtype. */
const SYSTEM = {
  init: 'init',
  compact_boundary: 'compacted',
  session_state_changed: 'state',
  status: 'work',
  api_retry: 'work',
  control_request_progress: 'work',
  hook_started: 'work',
  hook_progress: 'work',
  hook_response: 'work',
  task_started: 'work',
  task_updated: 'work',
  task_progress: 'work',
  task_notification: 'work',
  thinking_tokens: 'work',
  permission_denied: 'work',
  turn_starting: 'work',
  turn_began_before_init: 'work',
  model_refusal_fallback: 'info',
  model_refusal_no_fallback: 'info',
  local_command_output: 'info',
  plugin_install: 'info',
  background_tasks_changed: 'info',
  worker_shutting_down: 'info',
  commands_changed: 'info',
  notification: 'info',
  files_persisted: 'info',
  memory_recall: 'info',
  elicitation_complete: 'info',
  mirror_error: 'info',
  informational: 'info',
  session_writes_lost: 'info',
};

/** Classes of the other messages, by type. */
const TYPES = {
  result: 'result',
  command_lifecycle: 'lifecycle',
  assistant: 'work',
  user: 'work',
  stream_event: 'work',
  tool_progress: 'work',
  tool_use_summary: 'info',
  auth_status: 'info',
  rate_limit_event: 'info',
  prompt_suggestion: 'info',
  conversation_reset: 'info',
  keep_alive: 'info',
};

/**
 * The class of one SDK message: 'result' | 'state' | 'lifecycle' | 'init' | 'compacted' | 'work' | 'info'
 * | 'unknown'.
 */
export function classify(msg) {
  if (msg?.type === 'system') return SYSTEM[msg.subtype] ?? 'unknown';
  return TYPES[msg?.type] ?? 'unknown';
}

/** The name a message is logged by: its type, with the subtype of a system message. */
export function nameOf(msg) {
  return msg?.type === 'system' ? `system/${msg.subtype}` : String(msg?.type);
}
