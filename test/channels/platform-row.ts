/**
 * A channel held to its platform's row in core/platforms.ts: what the row says the platform can do, the
 * channel does, and what the row says it cannot, the channel does not offer. The conformance suite runs this
 * against every channel it tests (test/channels/platform-row.test.ts shows a row the channel fails).
 */
import type { Channel } from '../../channels/channel.js';
import type { PlatformRow } from '../../core/platforms.js';

/** Each way `channel` differs from `row`, as a sentence; empty when it is exactly what the row says. */
export function rowMismatches(channel: Channel, row: PlatformRow): string[] {
  const out: string[] = [];
  const format = channel.textFormat ?? 'markdown';
  if (format !== row.textFormat)
    out.push(`text format: the row says ${row.textFormat}, the channel ${format}`);
  if (channel.limit !== row.limit || channel.limitUnit !== row.limitUnit) {
    out.push(
      `limit: the row says ${row.limit} ${row.limitUnit}, the channel ${channel.limit} ${channel.limitUnit}`,
    );
  }
  const has: Record<'reactions' | 'buttons' | 'drafts' | 'typing' | 'files', [boolean, string]> = {
    reactions: [typeof channel.react === 'function', 'react'],
    buttons: [channel.approvals !== undefined, 'approvals'],
    drafts: [channel.drafts !== undefined, 'drafts'],
    typing: [typeof channel.typing === 'function', 'typing'],
    files: [
      typeof channel.sendFile === 'function' && typeof channel.fetchAttachment === 'function',
      'sendFile and fetchAttachment',
    ],
  };
  if (row.spoken !== null && !row.files)
    out.push(`spoken: the row says replies arrive as ${row.spoken}, but it has no files to carry them`);
  for (const [ability, [present, member]] of Object.entries(has)) {
    const promised = row[ability as keyof typeof has];
    if (promised && !present) out.push(`${ability}: the row says yes, the channel has no ${member}`);
    if (!promised && present) out.push(`${ability}: the row says no, the channel has ${member}`);
  }
  if (row.stream && channel.drafts === undefined)
    out.push('stream: the row streams drafts by default, the channel has no drafts');
  return out;
}
