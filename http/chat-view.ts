import type { AccessSource } from '../store/access.js';
import type { ChatLine } from '../channels/web/index.js';
import type { Viewer } from './identity.js';

/**
 * What of a group's web chat a viewer may read (docs/SECURITY.md "Identities", docs/ACCESS.md): a sender who may reach the
 * group (an owner or member, or anyone not blocked when it is open) reads every line; anyone else reads
 * only its own posts and the answers to them, so a stranger of an `approval` group still sees its pairing
 * code, and nothing the members wrote. Decided again for every page and every live event: an approval or
 * a block applies to the next line of an open stream.
 */
export class ChatReaders {
  constructor(private readonly access: AccessSource) {}

  /** Null when the viewer reads the whole chat; else the sender whose own rows it reads. */
  only(folder: string, viewer: Viewer): string | null {
    return this.access.mayReach(folder, { platform: 'web', id: viewer.sender }) ? null : viewer.sender;
  }

  /** Why the viewer reads only its own rows (shown by the page), or undefined when it reads all. */
  restriction(folder: string, viewer: Viewer): string | undefined {
    if (this.only(folder, viewer) === null) return undefined;
    return (
      `${folder} answers its members only: you see your own messages and the answers to them ` +
      `(you are web:${viewer.sender})`
    );
  }
}

/** True when a line is shown to a viewer limited to `only`'s rows (null: every line is). */
export function lineSeen(only: string | null, line: Pick<ChatLine, 'role' | 'sender' | 'reply_to'>): boolean {
  if (only === null) return true;
  if (line.role === 'user') return line.sender === only;
  return line.reply_to !== null && line.reply_to.startsWith(`${only}-`);
}
