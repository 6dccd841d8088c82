import { expandCommand, findCommand, slashWord } from '../../core/group-config.js';
import type { Logger } from '../../core/log.js';

/**
 * Chat commands from files (docs/AGENTS.md): a message for a group whose first token is `/<name>`, where
 * `commands/<name>.md` exists in the group's configuration, becomes that file's text with `$ARGUMENTS`
 * replaced by the rest of the message, for the agent only (the stored row keeps what the user wrote, as
 * agent_content does for a stripped prefix). Gateway commands never get here: the command layer took them.
 */
export function expandChatCommand(
  configDir: string,
  group: string,
  content: string,
  log: Logger,
): string | undefined {
  const word = slashWord(content);
  if (!word) return undefined;
  const command = findCommand(configDir, group, word.name, (p) =>
    log.warn({ group, file: p.file, reason: p.reason }, 'configuration file not used'),
  );
  return command ? expandCommand(command, word.rest) : undefined;
}
