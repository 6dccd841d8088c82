/**
 * core/platforms.ts is the one description of each platform; docs/CHANNELS.md shows the same rows for
 * readers. This test renders the rows as the doc's table and compares, so the two cannot drift apart.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { PLATFORMS, platformRow, standInText, type PlatformRow } from '../../core/platforms.js';
import { contentOf } from '../../voice/transcriber.js';

const yes = (b: boolean) => (b ? 'yes' : '–');

/** A row as docs/CHANNELS.md writes it. */
function rendered(name: string, r: PlatformRow): string {
  const cells = [
    name,
    r.textFormat,
    `${r.limit} ${r.limitUnit}`,
    yes(r.reactions),
    yes(r.buttons),
    yes(r.drafts),
    yes(r.stream),
    r.draftsPerSecond === null ? '–' : String(r.draftsPerSecond),
    r.typingRenewMs === null ? yes(r.typing) : `every ${r.typingRenewMs / 1000} s`,
    yes(r.files),
    r.spoken ?? '–',
    yes(r.folderRooms),
    yes(r.repositoryRooms !== null),
    r.threads ?? '–',
    r.senderIds,
    r.memberRoles.join(', ') || '–',
    r.doctor ?? '–',
  ];
  return `| ${cells.join(' | ')} |`;
}

describe('platforms', () => {
  it('docs/CHANNELS.md shows every row as core/platforms.ts has it, in its order', () => {
    const doc = readFileSync(packageFile('docs', 'CHANNELS.md'), 'utf8');
    const names = Object.keys(PLATFORMS);
    const lines = doc
      .split('\n')
      .filter((l) => names.some((n) => l.startsWith(`| ${n} | `)) && /\| (yes|–) \|/.test(l));
    expect(lines).toEqual(Object.entries(PLATFORMS).map(([n, r]) => rendered(n, r)));
  });

  it('a typing indicator is renewed exactly where the platform shows one', () => {
    for (const [name, r] of Object.entries(PLATFORMS)) {
      expect(r.typingRenewMs === null, name).toBe(!r.typing);
      if (r.typingRenewMs !== null) expect(r.typingRenewMs, name).toBeGreaterThan(0);
    }
  });

  it('platformRow: a row for each platform, none for another name or an inherited key', () => {
    expect(platformRow('slack')?.reactions).toBe(true);
    expect(platformRow('email')?.reactions).toBe(false);
    expect(platformRow('matrix')).toBeUndefined();
    expect(platformRow('constructor')).toBeUndefined();
    expect(platformRow('')).toBeUndefined();
  });

  it("a channel's stand-in for a file is not taken for the caption of a transcribed message", () => {
    const done = { state: 'done', text: 'the words', durationS: 1, transcriber: 't', tookMs: 1 } as const;
    const voice = standInText({ kind: 'voice' });
    const memo = standInText({ name: 'memo.ogg' });
    expect([voice, memo]).toEqual(['[voice]', '[attachment: memo.ogg]']);
    expect(contentOf(voice, done)).toBe('the words');
    expect(contentOf(`${memo} ${standInText({ name: 'b.ogg' })}`, done)).toBe('the words');
    expect(contentOf(`${voice} call me back`, done)).toBe('call me back\n\nthe words');
  });
});
