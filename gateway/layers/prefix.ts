import { isTopicName, resolveGroupName } from './names.js';
import type { Layer } from './types.js';

const GROUP_PREFIX = /^@([a-z0-9_/-]+)\s+(\S[\s\S]*)$/;
const TOPIC_PREFIX = /^#([A-Za-z0-9_-]+)\s+(\S[\s\S]*)$/;

/**
 * Layer 3. Content that starts with `@name ` or `#topic ` followed by more text sends this one message to
 * that group (a child of the chat's group first, then an absolute folder) or that topic, and the prefix is
 * stripped from what the agent gets (the stored row keeps the text as written). Anchored at the start: `@` or `#` inside the text (emails, hashtags, handles mid-sentence) is
 * never a prefix, and an unknown `@name` is not a prefix either (the message goes on unchanged).
 */
export const prefixLayer: Layer = (passage, env) => {
  const text = passage.content.replace(/^\s+/, '');
  const g = GROUP_PREFIX.exec(text);
  // A chat that no route sends to a group reaches no group by prefix either: `@demo` from an unrouted
  // chat must not run demo's agent.
  const home = passage.group ?? env.chatGroup(passage);
  if (g && home !== undefined) {
    const group = resolveGroupName(g[1]!, home, env.catalog);
    if (group) {
      passage.group = group;
      passage.content = g[2]!;
    }
  }
  const t = TOPIC_PREFIX.exec(passage.content.replace(/^\s+/, ''));
  if (t && isTopicName(t[1]!)) {
    passage.topic = t[1]!;
    passage.content = t[2]!;
  }
  return 'next';
};
