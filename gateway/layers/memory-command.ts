import { clipText } from '../../core/text.js';
import { principalId, principalOf } from '../../store/access.js';
import { withActor } from '../../store/audit.js';
import { GROUP_SCOPE, MemoryStore, type Fact } from '../../store/memory.js';
import type { LayerEnv, Passage } from './types.js';

/**
 * `/memory` and `/forget ID|all` (docs/MEMORY.md): a sender sees what the agent keeps about them and the
 * group, and deletes their own facts; an owner of the group deletes any of the group's. Inside the batch
 * transaction; every delete is audited with the sender as its actor (`chat:<platform:id>`).
 */

/** Most facts `/memory` lists in one answer. */
const LIST_MAX = 30;

function line(f: Fact, who: string): string {
  const whose = f.scope === GROUP_SCOPE ? 'group' : f.scope === who ? 'you' : f.scope;
  return `#${f.id} [${whose}] ${clipText(f.text.replace(/\s+/g, ' '), 200)}`;
}

/** The group of the chat and whether the sender may use its memory, or the answer that refuses. */
function memoryOf(passage: Passage, env: LayerEnv, name: string): { group: string; who: string } | string {
  const group = passage.group ?? env.chatGroup(passage);
  if (!group) return 'this chat has no group yet: no route sends it anywhere';
  const refused = env.access.refusal(passage.msg, group);
  if (refused) return `/${name} refused: ${refused}`;
  return { group, who: principalId(principalOf(passage.msg)) };
}

/** `/memory`: the sender's facts and the group's, newest last. */
export function memoryCommand(passage: Passage, env: LayerEnv): void {
  const m = memoryOf(passage, env, 'memory');
  if (typeof m === 'string') return env.answer(passage.msg, m);
  const store = new MemoryStore(env.db);
  const facts = [...store.list(m.group, GROUP_SCOPE), ...store.list(m.group, m.who)].sort(
    (a, b) => a.id - b.id,
  );
  if (facts.length === 0) return env.answer(passage.msg, `nothing is remembered about you or ${m.group}`);
  const shown = facts.slice(-LIST_MAX);
  const lines = [`remembered in ${m.group} (about you and the group; /forget ID or /forget all):`];
  if (shown.length < facts.length) lines.push(`… ${facts.length - shown.length} older not shown`);
  for (const f of shown) lines.push(line(f, m.who));
  env.answer(passage.msg, lines.join('\n'));
}

/** `/forget ID` or `/forget all`. */
export function forgetCommand(passage: Passage, args: readonly string[], env: LayerEnv): void {
  const m = memoryOf(passage, env, 'forget');
  if (typeof m === 'string') return env.answer(passage.msg, m);
  const owner = env.access.source.role(m.group, principalOf(passage.msg)) === 'owner';
  const store = new MemoryStore(env.db);
  const arg = (args[0] ?? '').replace(/^#/, '').toLowerCase();
  const actor = `chat:${m.who}`;
  if (arg === 'all') {
    const n = withActor(env.db, actor, () =>
      owner
        ? store.list(m.group, undefined, 1_000_000).reduce((k, f) => k + Number(store.forget(f.id)), 0)
        : store.forgetScope(m.group, m.who),
    );
    return env.answer(
      passage.msg,
      `forgot ${n} fact${n === 1 ? '' : 's'} ${owner ? `of ${m.group}` : 'about you'}`,
    );
  }
  if (!/^\d{1,15}$/.test(arg))
    return env.answer(passage.msg, 'usage: /forget ID | /forget all (see /memory)');
  const fact = store.get(Number(arg));
  if (fact === undefined || fact.group_folder !== m.group)
    return env.answer(passage.msg, `no fact #${arg} in ${m.group}`);
  if (fact.scope !== m.who && !owner)
    return env.answer(passage.msg, `fact #${arg} is not yours: only an owner of ${m.group} may forget it`);
  withActor(env.db, actor, () => store.forget(fact.id));
  env.answer(passage.msg, `forgot #${fact.id}`);
}
