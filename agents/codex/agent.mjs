// The Codex agent: the Codex CLI (through @openai/codex-sdk, which drives the bundled `codex` binary)
// speaking gated's agent protocol with turns (docs/PROTOCOL.md, docs/AGENTS.md), like agents/claude.
//
// One run is one Codex thread: the first stdin line starts it (or resumes the stored thread `sessionId`),
// and every later line becomes a turn of it, one at a time; lines that arrive during a turn go together as
// the next one. Each turn is one `codex exec` of the SDK; while it streams, `partial` blocks carry the text
// so far (when gated numbers its lines), and the turn ends with one block carrying `turn`, `newSessionId`
// (the thread id) and `usage`. End of stdin, or {"type":"end"}, finishes what was read and exits 0.
//
// The model provider is always the one defined here ("gated"): the Responses API at OPENAI_BASE_URL (a
// secret; default OpenAI's), key from OPENAI_API_KEY, without websockets; threads are kept in the group's
// folder (.codex-agent/), so a later run resumes them. Secrets go only to the CLI's own environment. The
// group's configuration (input `config`) becomes developer instructions and MCP servers of the thread.
//
// Tools: the group's MCP servers and gated's actions (the input's `capabilities`) reach the CLI only through
// the tool bridge (bridge.mjs): each call is first asked about (an `ask` block, answered by a `permission`
// line), and an allowed action is recorded for the turn's final block (`actions`), as the Claude agent does.
// gated's memory (recall, search_history) is asked with a `memory` block, answered by a `memory` line.
// The CLI's own shell commands are asked about by its PreToolUse hook (hook.mjs), through the same bridge.
import { createInterface } from 'node:readline';
import { Codex } from '@openai/codex-sdk';
import { offered } from './actions.mjs';
import { Asks, ToolBridge } from './bridge.mjs';
import { locateCli, projectSettings, WRAPPER, wrapperUsable } from './cli.mjs';
import { configOf, groupServersOf, transient } from './config.mjs';
import { runHome } from './home.mjs';
import { MemoryQuestions } from './memory.mjs';
import { heldTurn, remainingPrompt, replay } from './resume.mjs';

const START = '---GATED_OUTPUT_START---';
const END = '---GATED_OUTPUT_END---';
/** Drafts: at most one every this many ms. */
const PARTIAL_MS = Number(process.env.GATED_CODEX_PARTIAL_MS ?? 400);
/**
 * In a container (the agent's image sets GATED_CODEX_IN_CONTAINER=1) the container is the sandbox: the
 * CLI's own one needs bubblewrap, which cannot make its namespaces there, and every command would fail.
 * The folder's mounts (the configuration read-only), the container's lockdown and gated's asks (the hook
 * below) still hold. On the host (the process runtime) the CLI's sandbox keeps writes inside the folder.
 */
const IN_CONTAINER = process.env.GATED_CODEX_IN_CONTAINER === '1';
/** How often a turn's rollout is copied into the folder while the turn runs. */
const SAVE_MS = 200;
/** Exit status of a turn the API could not serve: gated retries the run. */
const EXIT_TEMPFAIL = 75;
/** Secrets passed on to the CLI: the API's own, nothing else. */
const PASSED_SECRET = /^(OPENAI_API_KEY|CODEX_[A-Z0-9_]+)$/;

const cwd = process.cwd();
// CODEX_HOME: a fresh private folder per run, outside the workspace (home.mjs); set in main().
let home = '';

function emit(block) {
  process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
}

function say(line) {
  process.stderr.write(`codex agent: ${line}\n`);
}

function childEnv(secrets, cli) {
  const path = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
  const env = {
    // The CLI's helper programs first, as the SDK does when it starts the CLI itself.
    PATH: cli?.pathDir ? `${cli.pathDir}:${path}` : path,
    ...(cli ? { GATED_CODEX_BIN: cli.binary } : {}),
    HOME: process.env.HOME ?? '/tmp',
    LANG: process.env.LANG ?? 'C.UTF-8',
    CODEX_HOME: home,
  };
  for (const [k, v] of Object.entries(secrets ?? {}))
    if (PASSED_SECRET.test(k) && typeof v === 'string') env[k] = v;
  return env;
}

/**
 * Runs one turn: streams drafts, returns the final text and usage (throws when the turn failed). An abort
 * of `signal` (an interrupt) ends it early with what it had: `interrupted: true`.
 */
async function runTurn(thread, prompt, turn, numbered, signal, saved) {
  let text = '';
  let usage = null;
  let lastPartial = 0;
  // An empty draft first: it shows nothing, and tells gated this agent numbers its blocks (so it may write
  // follow-ups and interrupts while the turn runs). `codex exec` reports a message only once it is whole.
  if (numbered) emit({ status: 'ok', partial: true, turn, result: '' });
  // What the CLI wrote of the turn so far is kept in the folder as it goes (at each item and every
  // SAVE_MS): a run killed mid-turn is resumed from it (resume.mjs).
  const saving = setInterval(saved, SAVE_MS);
  try {
    const { events } = await thread.runStreamed(prompt, { signal });
    for await (const ev of events) handle(ev);
  } catch (err) {
    if (signal.aborted) return { text, usage, interrupted: true };
    throw err;
  } finally {
    clearInterval(saving);
  }
  return { text, usage, interrupted: signal.aborted };

  function handle(ev) {
    if (ev.type === 'item.completed') saved();
    if ((ev.type === 'item.updated' || ev.type === 'item.completed') && ev.item.type === 'agent_message') {
      text = ev.item.text;
      const now = Date.now();
      if (numbered && ev.type === 'item.updated' && now - lastPartial >= PARTIAL_MS && text.trim() !== '') {
        lastPartial = now;
        emit({ status: 'ok', partial: true, turn, result: text });
      }
    } else if (ev.type === 'turn.completed') {
      usage = ev.usage;
    } else if (ev.type === 'turn.failed') {
      throw new Error(ev.error?.message ?? 'the turn failed');
    } else if (ev.type === 'error') {
      say(ev.message);
    }
  }
}

/** Reads the first stdin line (null: input ended first; throws on a line that is not JSON). */
async function firstLine(lines) {
  for (;;) {
    const next = await lines.next();
    if (next.done) return null;
    if (next.value.trim() === '') continue;
    return JSON.parse(next.value);
  }
}

async function main() {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const lines = rl[Symbol.asyncIterator]();
  let first;
  try {
    first = await firstLine(lines);
  } catch {
    say('the first stdin line was not JSON');
    return 2;
  }
  if (first === null) return 0;
  const run = await runHome(cwd);
  home = run.dir;
  try {
    return await serveRun(first, lines, run);
  } finally {
    run.save();
    run.remove();
  }
}

/** The run after its first line: the bridge, the CLI, every turn. */
async function serveRun(first, lines, run) {
  const secrets = first.secrets ?? {};
  // Actions the model records during a turn (allowed by gated); the turn's final block carries them.
  let recorded = [];
  const record = (a) => recorded.push(a);
  const asks = new Asks(emit);
  const memory = new MemoryQuestions(emit);
  const bridge = new ToolBridge({
    servers: groupServersOf(first.config, secrets),
    actions: offered(first.capabilities),
    asks,
    memory,
    record,
    log: say,
    cwd,
  });
  await bridge.start();
  // The CLI behind a wrapper that lets its PreToolUse hook run (cli.mjs): then its shell is asked about too.
  const cli = wrapperUsable() ? locateCli() : null;
  if (cli) bridge.hooks = true;
  else say('the Codex CLI cannot be started through its wrapper here: its own tools are not asked about');
  const takeRecorded = () => {
    const out = recorded;
    recorded = [];
    return out;
  };
  try {
    return await serve(resumed(first, record), lines, {
      secrets,
      asks,
      memory,
      bridge,
      takeRecorded,
      cli,
      run,
    });
  } finally {
    await bridge.close();
  }
}

/**
 * Reads stdin after the first line: turns go to `queue(line)`, permission lines to `asks`, memory lines to
 * `memory`, interrupts to `interrupt(turn)`; resolves when the input ends (EOF or {"type":"end"}).
 */
async function readLines(lines, { queue, asks, memory, interrupt }) {
  for (;;) {
    const next = await lines.next();
    if (next.done) return;
    if (next.value.trim() === '') continue;
    let line;
    try {
      line = JSON.parse(next.value);
    } catch {
      say('a stdin line was not JSON: ignored');
      continue;
    }
    if (line.type === 'end') return;
    // Not a turn: the answer to a tool question.
    if (line.type === 'permission') asks.permission(line);
    // Nor the receipt of a call's end reported by the bridge.
    else if (line.type === 'receipt') asks.receipt(line);
    // Nor the answer to a memory question (recall, search_history).
    else if (line.type === 'memory') memory.line(line);
    // Interrupts (§19) stop the turn in progress when it is the one named or an earlier one; steered lines
    // are plain follow-ups here (the CLI cannot take a message inside a running turn).
    else if (line.type === 'interrupt') {
      if (Number.isInteger(line.turn)) interrupt(line.turn);
    } else if (typeof line.prompt === 'string') queue(line);
  }
}

/**
 * The first line as the run sends it: when the stored thread already holds its messages (a turn a crash
 * cut off, resume.mjs), a note to go on and only the messages it lacks; what the kept calls of gated's
 * actions recorded is recorded again.
 */
function resumed(first, record) {
  const own = typeof first.sessionId === 'string' && first.sessionId !== '' ? first.sessionId : null;
  const held = own ? heldTurn(home, own, first) : null;
  if (!held) return first;
  say(`thread ${own} holds this turn's messages: it goes on after what it kept`);
  replay(held, offered(first.capabilities), record);
  return { ...first, prompt: remainingPrompt(first, held) };
}

/** Runs the thread: the first line, then every line read, turn by turn; returns the exit status. */
async function serve(first, lines, { secrets, asks, memory, bridge, takeRecorded, cli, run }) {
  const numbered = Number.isInteger(first.turn);
  const codex = new Codex({
    env: childEnv(secrets, cli),
    config: configOf(first, secrets, bridge),
    ...(cli ? { codexPathOverride: WRAPPER } : {}),
  });
  const options = {
    workingDirectory: cwd,
    skipGitRepoCheck: true,
    // Writes only inside the folder (the configuration folders stay read-only). The CLI never asks
    // (nobody could answer it in exec mode); MCP tools are asked about through the bridge instead.
    sandboxMode: IN_CONTAINER ? 'danger-full-access' : 'workspace-write',
    approvalPolicy: 'never',
    networkAccessEnabled: false,
    webSearchMode: 'disabled',
    ...(typeof first.model === 'string' && first.model !== '' ? { model: first.model } : {}),
  };
  const own = typeof first.sessionId === 'string' && first.sessionId !== '' ? first.sessionId : null;
  const thread = own ? codex.resumeThread(own, options) : codex.startThread(options);

  const waiting = [first];
  let inputEnded = false;
  let wake = null;
  // The turn in progress: its number and the controller an interrupt aborts.
  let current = null;
  const reading = readLines(lines, {
    asks,
    memory,
    queue: (line) => {
      waiting.push(line);
      wake?.();
    },
    interrupt: (turn) => {
      if (current && current.turn !== null && current.turn <= turn) current.abort.abort();
    },
  }).then(() => {
    inputEnded = true;
    wake?.();
  });

  for (;;) {
    if (waiting.length === 0) {
      if (inputEnded) break;
      await new Promise((r) => (wake = r));
      wake = null;
      continue;
    }
    const batch = waiting.splice(0);
    const turns = batch.map((l) => l.turn).filter((t) => Number.isInteger(t));
    const turn = turns.length > 0 ? Math.max(...turns) : null;
    current = { turn, abort: new AbortController() };
    try {
      const foreign = bridge.hooks ? projectSettings(cwd) : [];
      if (foreign.length > 0)
        throw new Error(
          `Codex settings in the group's folder (${foreign.join(', ')}) are not loaded by this agent: remove them`,
        );
      run.clean();
      const prompt = batch.map((l) => l.prompt).join('\n');
      const done = await runTurn(thread, prompt, turn, numbered, current.abort.signal, run.save);
      // The thread's rollout kept before the answer is given: a crash after it still resumes the thread.
      run.save();
      emit(answerOf(done, thread.id, turn, takeRecorded()));
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      // The turn did not complete: what it recorded is not asked for (a retried turn asks again).
      const dropped = takeRecorded();
      if (dropped.length > 0) say(`${dropped.length} recorded action(s) dropped with the failed turn`);
      if (transient(msg)) {
        say(`the API could not serve the turn: ${msg.slice(0, 300)}`);
        return EXIT_TEMPFAIL;
      }
      emit({
        status: 'error',
        result: `The agent could not answer: ${msg.slice(0, 500)}`,
        error: msg.slice(0, 2000),
        newSessionId: thread.id,
        ...(turn !== null ? { turn } : {}),
      });
    } finally {
      current = null;
    }
  }
  await reading;
  return 0;
}

/** The block that ends a turn: its text, thread, usage and the actions it recorded. */
function answerOf({ text, usage, interrupted }, threadId, turn, actions) {
  return {
    status: 'ok',
    result: text,
    newSessionId: threadId,
    ...(turn !== null ? { turn } : {}),
    ...(interrupted ? { interrupted: true } : {}),
    // An interrupted turn's actions are not asked for: the user changed their mind.
    ...(actions.length > 0 && !interrupted ? { actions } : {}),
    usage: {
      input_tokens: usage?.input_tokens ?? 0,
      output_tokens: usage?.output_tokens ?? 0,
    },
  };
}

main().then(
  (code) => process.exit(code),
  (err) => {
    say(`failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(transient(String(err)) ? EXIT_TEMPFAIL : 1);
  },
);
