// The Codex CLI's PreToolUse hook (docs/AGENTS.md, "The Codex agent"): before the CLI runs one of its own
// tools (a shell command is `Bash` with `{"command": …}`), this asks gated through the agent's tool bridge
// (bridge.mjs) and waits for the decision. Allowed: exits without output and the CLI goes on. Refused, or
// the bridge unreachable: a `deny` decision whose reason the model reads. MCP tools (`mcp__…`) are left
// alone here: their calls are asked about by the bridge itself, once. As the CLI's PostToolUse hook it
// reports how an allowed call ended (its output) and gives the model gated's receipt as the hook's context.
//
// Usage (written by config.mjs into the CLI's hooks): node hook.mjs SOCKET; the CLI writes the event as
// JSON on stdin.
import { createConnection } from 'node:net';

const path = process.argv[2];

function decide(reason) {
  if (reason !== null)
    process.stdout.write(
      JSON.stringify({
        hookSpecificOutput: {
          hookEventName: 'PreToolUse',
          permissionDecision: 'deny',
          permissionDecisionReason: reason,
        },
      }),
    );
  process.exit(0);
}

/** Reads stdin until it holds one JSON value (the CLI may keep stdin open). */
function readEvent() {
  return new Promise((resolve) => {
    let buf = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (d) => {
      buf += d;
      try {
        resolve(JSON.parse(buf));
      } catch {
        // Not whole yet.
      }
    });
    process.stdin.on('end', () => resolve(null));
  });
}

const event = await readEvent();
if (!event || typeof event.tool_name !== 'string') decide('The gateway could not read the tool call.');
if (event.tool_name.startsWith('mcp__')) decide(null);
if (event.hook_event_name === 'PostToolUse') await reportEnd(event);
if (!path) decide('The gateway is not reachable: the tool was not asked about.');

const socket = createConnection(path);
let buf = '';
socket.setEncoding('utf8');
socket.on('data', (chunk) => {
  buf += chunk;
  const nl = buf.indexOf('\n');
  if (nl < 0) return;
  let reply;
  try {
    reply = JSON.parse(buf.slice(0, nl));
  } catch {
    decide('The gateway answered nonsense: the tool was not run.');
  }
  if (!reply.ok) decide(`The tool was not run: ${reply.error ?? 'the gateway failed'}`);
  const { decision, note, receipt } = reply.value ?? {};
  const refused = note ? `Refused: ${note}` : 'Refused by the operator.';
  decide(decision === 'allow' ? null : receipt ? `${refused} (gated receipt: ${receipt})` : refused);
});
socket.on('error', () => decide('The gateway is not reachable: the tool was not run.'));
socket.on('close', () => decide('The gateway went away: the tool was not run.'));
socket.write(
  `${JSON.stringify({ id: 1, op: 'hook', server: '', tool: event.tool_name, args: event.tool_input ?? {}, use: event.tool_use_id })}\n`,
);

/**
 * After one of the CLI's own tools ran: reports its output through the bridge (on record, docs/PROTOCOL.md)
 * and gives the model gated's receipt as the hook's context. Whatever fails, the CLI goes on without it.
 */
async function reportEnd(ev) {
  const receipt = await new Promise((resolve) => {
    if (!path) return resolve(undefined);
    const s = createConnection(path);
    let got = '';
    s.setEncoding('utf8');
    s.on('data', (chunk) => {
      got += chunk;
      const nl = got.indexOf('\n');
      if (nl < 0) return;
      try {
        resolve(JSON.parse(got.slice(0, nl)).value?.receipt);
      } catch {
        resolve(undefined);
      }
      s.end();
    });
    s.on('error', () => resolve(undefined));
    s.on('close', () => resolve(undefined));
    s.write(
      `${JSON.stringify({ id: 1, op: 'post', use: ev.tool_use_id, output: ev.tool_response ?? '' })}\n`,
    );
  });
  if (typeof receipt === 'string')
    process.stdout.write(
      JSON.stringify({
        hookSpecificOutput: {
          hookEventName: 'PostToolUse',
          additionalContext: `gated receipt of this call: ${receipt}`,
        },
      }),
    );
  process.exit(0);
}
