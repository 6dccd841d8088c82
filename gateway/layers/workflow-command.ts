import { principalId, principalOf } from '../../store/access.js';
import { WorkflowStore, type WorkflowRunRow } from '../../store/workflows.js';
import { cancelRun, resumeRun, startRun, statusText } from '../workflow-runs.js';
import type { LayerEnv, Passage } from './types.js';

/**
 * `/workflow run NAME [args] | status [ID] | cancel [ID] | resume [ID]` (docs/WORKFLOWS.md), for members of
 * the chat's group. Without an ID, the chat's newest run (running first). Runs inside the batch transaction.
 */
export const WORKFLOW_USAGE = 'usage: /workflow run NAME [args] | status [ID] | cancel [ID] | resume [ID]';

export function workflowCommand(passage: Passage, env: LayerEnv): void {
  const { msg } = passage;
  const group = passage.group ?? env.chatGroup(passage);
  if (!group) return env.answer(msg, 'this chat has no group yet: no route sends it anywhere');
  const refused = env.access.refusal(msg, group);
  if (refused) return env.answer(msg, `/workflow refused: ${refused}`);
  // The words after `/workflow` as written: the arguments keep their line breaks.
  const rest = passage.content.replace(/^\s*\/\S+\s*/, '');
  const [verb = '', ...more] = rest.split(/\s+/);
  const who = principalId(principalOf(msg));
  const store = new WorkflowStore(env.db);
  if (verb === 'run') {
    const m = /^\s*run\s+(\S+)\s*([\s\S]*)$/.exec(rest);
    if (!m) return env.answer(msg, WORKFLOW_USAGE);
    if (env.config.configDir === undefined) return env.answer(msg, 'workflows need GATED_CONFIG_DIR');
    const started = startRun({
      db: env.db,
      configDir: env.config.configDir,
      group,
      name: m[1]!.toLowerCase(),
      args: m[2] ?? '',
      chatJid: msg.chat_jid,
      thread: msg.topic,
      sender: msg.sender,
      now: env.now,
    });
    if (started.run !== undefined) env.workflow();
    return env.answer(msg, started.text);
  }
  if (!['status', 'cancel', 'resume'].includes(verb)) return env.answer(msg, WORKFLOW_USAGE);
  const run = pick(store, msg.chat_jid, group, more[0]);
  if (typeof run === 'string') return env.answer(msg, run);
  if (verb === 'status') return env.answer(msg, statusText(env.db, run));
  if (verb === 'resume') {
    env.workflow();
    return env.answer(msg, resumeRun(env.db, run, who, env.now));
  }
  const done = cancelRun(env.db, run, who, env.now);
  for (const key of done.stop) env.afterCommit(() => env.queue.stop(key, msg.chat_jid).then(() => {}));
  env.answer(msg, done.text);
}

/** The run an ID names (of this group), or the chat's newest (a running one first); or why none. */
function pick(
  store: WorkflowStore,
  chatJid: string,
  group: string,
  id: string | undefined,
): WorkflowRunRow | string {
  if (id !== undefined) {
    const n = Number(id.replace(/^#/, ''));
    const run = Number.isInteger(n) ? store.run(n) : undefined;
    return run && run.group_folder === group ? run : `no workflow run ${id} in ${group}`;
  }
  const runs = store.ofChat(chatJid).filter((r) => r.group_folder === group);
  return runs.find((r) => r.state === 'running') ?? runs[0] ?? 'no workflow run in this chat yet';
}
