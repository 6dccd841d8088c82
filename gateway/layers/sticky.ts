import { clipText } from '../../core/text.js';
import { isTopicName, resolveGroupName } from './names.js';
import type { Layer } from './types.js';

/**
 * Layer 1. A message whose whole trimmed content is one token `@name` or `#topic` sets the chat's sticky
 * group or topic; a bare `@` or `#` resets it. Later messages of the chat go there until reset. An unknown
 * `@name` is answered with an error and changes nothing. Other messages pick up the chat's sticky state.
 *
 * The state is shared by everyone in the chat, so only a sender who may reach the group the chat goes to
 * now and the group it would go to may change it (docs/SECURITY.md); anyone else gets a short refusal. An
 * edited message or a transcript never changes it: it only follows it, like any other message.
 */
export const stickyLayer: Layer = (passage, env) => {
  const { msg } = passage;
  const token = passage.content.trim();
  const sticky = env.sticky.get(msg.chat_jid);
  // A transcript (docs/VOICE.md) follows the state like an edit and never changes it.
  const spoken = msg.transcript !== null && msg.transcript !== undefined;
  if (msg.verb !== 'edit' && !spoken && /^[@#]\S*$/.test(token)) {
    const name = token.slice(1);
    const now = sticky.group ?? env.chatGroup(passage);
    const refused = (target: string | undefined): boolean => {
      const why =
        (now === undefined ? undefined : env.access.refusal(msg, now)) ??
        (target === undefined ? undefined : env.access.refusal(msg, target));
      if (why === undefined) return false;
      env.answer(msg, `refused: ${why}; the chat's routing is unchanged`);
      env.finish(msg, 'command', why);
      return true;
    };
    if (token[0] === '@') {
      if (name === '') {
        // Resetting sends the chat back to its route's group: the sender must be able to reach that too.
        if (refused(env.chatGroup(passage))) return 'handled';
        env.sticky.setGroup(msg.chat_jid, null);
        env.answer(msg, 'sticky group cleared: messages follow the routing table again');
      } else {
        const group = now === undefined ? undefined : resolveGroupName(name, now, env.catalog);
        if (now === undefined) {
          // A chat no route sends to a group cannot pick one: it would reach any agent by name.
          env.answer(msg, `this chat has no group: '@${clipText(name, 64)}' changes nothing`);
        } else if (!group) {
          env.answer(msg, `unknown group '@${clipText(name, 64)}': nothing changed`);
        } else if (refused(group)) {
          return 'handled';
        } else {
          env.sticky.setGroup(msg.chat_jid, group);
          env.answer(msg, `messages of this chat now go to @${group} (send @ alone to reset)`);
        }
      }
      env.finish(msg, 'command');
      return 'handled';
    }
    if ((name === '' || isTopicName(name)) && refused(undefined)) return 'handled';
    if (name === '') {
      env.sticky.setTopic(msg.chat_jid, null);
      env.answer(msg, 'sticky topic cleared: back to the default topic');
      env.finish(msg, 'command');
      return 'handled';
    }
    if (isTopicName(name)) {
      env.sticky.setTopic(msg.chat_jid, name);
      env.answer(msg, `messages of this chat now go to topic #${name} (send # alone to reset)`);
      env.finish(msg, 'command');
      return 'handled';
    }
    // `#1`-like tokens that are not topic names travel on as text.
  }
  if (sticky.group) passage.group = sticky.group;
  if (sticky.topic) passage.topic = sticky.topic;
  return 'next';
};
