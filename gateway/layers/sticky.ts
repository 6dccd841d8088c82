import { clipText } from '../../core/text.js';
import { isTopicName, resolveGroupName } from './names.js';
import type { Layer } from './types.js';

/**
 * Layer 1. A message whose whole trimmed content is one token `@name` or `#topic` sets the chat's sticky
 * group or topic; a bare `@` or `#` resets it. Later messages of the chat go there until reset. An unknown
 * `@name` is answered with an error and changes nothing. Other messages pick up the chat's sticky state.
 */
export const stickyLayer: Layer = (draft, env) => {
  const { msg } = draft;
  const token = draft.content.trim();
  const sticky = env.sticky.get(msg.chat_jid);
  if (/^[@#]\S*$/.test(token)) {
    const name = token.slice(1);
    if (token[0] === '@') {
      if (name === '') {
        env.sticky.setGroup(msg.chat_jid, null);
        env.answer(msg, 'sticky group cleared: messages follow the routing table again');
      } else {
        const home = sticky.group ?? env.chatGroup(draft);
        const group = home === undefined ? undefined : resolveGroupName(name, home, env.catalog);
        if (home === undefined) {
          // A chat no route sends to a group cannot pick one: it would reach any agent by name.
          env.answer(msg, `this chat has no group: '@${clipText(name, 64)}' changes nothing`);
        } else if (!group) {
          env.answer(msg, `unknown group '@${clipText(name, 64)}': nothing changed`);
        } else {
          env.sticky.setGroup(msg.chat_jid, group);
          env.answer(msg, `messages of this chat now go to @${group} (send @ alone to reset)`);
        }
      }
      env.settle(msg, 'command');
      return 'handled';
    }
    if (name === '') {
      env.sticky.setTopic(msg.chat_jid, null);
      env.answer(msg, 'sticky topic cleared: back to the default topic');
      env.settle(msg, 'command');
      return 'handled';
    }
    if (isTopicName(name)) {
      env.sticky.setTopic(msg.chat_jid, name);
      env.answer(msg, `messages of this chat now go to topic #${name} (send # alone to reset)`);
      env.settle(msg, 'command');
      return 'handled';
    }
    // `#1`-like tokens that are not topic names travel on as text.
  }
  if (sticky.group) draft.group = sticky.group;
  if (sticky.topic) draft.topic = sticky.topic;
  return 'next';
};
