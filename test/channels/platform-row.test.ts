/**
 * The check the conformance suite makes of every channel (test/channels/platform-row.ts), shown failing: a
 * platform row that promises an ability its channel lacks, or denies one it has, or names another format or
 * limit, is named ability by ability. The channels are the real ones (GitHub against the local GitHub
 * server, the terminal on streams), only the rows are changed.
 */
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { GithubChannel } from '../../channels/github/index.js';
import { LocalChannel } from '../../channels/local/index.js';
import { silentLogger } from '../../core/log.js';
import { PLATFORMS } from '../../core/platforms.js';
import { GithubApiServer } from '../infra/github-api.js';
import { rowMismatches } from './platform-row.js';

let api: GithubApiServer | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

describe('a channel held to its platform row', () => {
  it('GitHub with buttons and typing added to its row: the suite names both as missing', async () => {
    api = await GithubApiServer.start();
    const channel = new GithubChannel({
      token: api.token,
      webhookSecret: 's',
      apiUrl: api.url,
      log: silentLogger(),
    });
    expect(rowMismatches(channel, PLATFORMS.github)).toEqual([]);
    const promised = { ...PLATFORMS.github, buttons: true, typing: true };
    expect(rowMismatches(channel, promised)).toEqual([
      'buttons: the row says yes, the channel has no approvals',
      'typing: the row says yes, the channel has no typing',
    ]);
    // The same check inside the suite's assertion fails the test.
    expect(() => expect(rowMismatches(channel, promised)).toEqual([])).toThrow(/to deeply equal \[\]/);
  });

  it('a row denying what the channel does, or naming another format or limit, is named too', () => {
    const input = new PassThrough();
    const output = new PassThrough();
    const channel = new LocalChannel({ folder: 'demo', input, output, sender: 'tester' });
    try {
      expect(rowMismatches(channel, PLATFORMS.local)).toEqual([]);
      expect(rowMismatches(channel, { ...PLATFORMS.local, textFormat: 'plain', limit: 300 })).toEqual([
        'text format: the row says plain, the channel markdown',
        'limit: the row says 300 chars, the channel 65536 chars',
      ]);
      expect(rowMismatches(channel, { ...PLATFORMS.local, files: true })).toEqual([
        'files: the row says yes, the channel has no sendFile and fetchAttachment',
      ]);
      expect(rowMismatches(channel, { ...PLATFORMS.local, stream: true })).toEqual([
        'stream: the row streams drafts by default, the channel has no drafts',
      ]);
    } finally {
      input.end();
      output.end();
    }
  });

  it('a row denying an ability the channel has: the channel may not do what its row does not say', async () => {
    api = await GithubApiServer.start();
    const channel = new GithubChannel({
      token: api.token,
      webhookSecret: 's',
      apiUrl: api.url,
      log: silentLogger(),
    });
    expect(rowMismatches(channel, { ...PLATFORMS.github, reactions: false, drafts: false })).toEqual([
      'reactions: the row says no, the channel has react',
      'drafts: the row says no, the channel has drafts',
    ]);
  });
});
