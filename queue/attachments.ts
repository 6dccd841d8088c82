import { attachmentsOf } from '../store/attachments.js';
import type { Db } from '../store/db.js';
import type { AgentAttachment, AgentMessage } from './prompt.js';

/**
 * Adds a message's files to what the agent reads: saved attachments as `attachments` (paths relative to
 * the group's folder, which is the agent's working directory in every runtime), and a note for each one
 * that is not there (too large, failed, still downloading) so the agent can tell the user. Called only
 * for a row whose read said it has files (the queue's batch rows do).
 */
export function withAttachments(db: Db, m: AgentMessage): AgentMessage {
  const rows = attachmentsOf(db, m.id);
  if (rows.length === 0) return m;
  const attachments: AgentAttachment[] = [];
  const notes: string[] = [];
  for (const a of rows) {
    if (a.state === 'saved' && a.path)
      attachments.push({
        path: a.path,
        mime: a.mime ?? 'application/octet-stream',
        size: a.size ?? 0,
        name: a.name,
      });
    else if (a.state === 'too_large')
      notes.push(`${a.kind} ${a.name} was not downloaded: ${a.error ?? 'too large'}`);
    else if (a.state === 'failed')
      notes.push(`${a.kind} ${a.name} could not be downloaded: ${a.error ?? 'unknown error'}`);
    else notes.push(`${a.kind} ${a.name} is still downloading and is not in the folder yet`);
  }
  return {
    ...m,
    ...(attachments.length > 0 ? { attachments } : {}),
    ...(notes.length > 0 ? { attachment_notes: notes } : {}),
  };
}
