/** The terminal channel (`gated chat`): lines from a readable in, replies to a writable out. */
import { userInfo } from 'node:os';
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { LocalChannel } from '../../channels/local/index.js';
import { freshDb } from '../helpers/db.js';
import { channelConformance } from './conformance.js';
import { inboundRows, recordingSink, testPart } from './support.js';

/** A terminal: what the user types goes into `input`; `lines` collects what the channel wrote. */
function terminal() {
  const input = new PassThrough();
  const lines: string[] = [];
  let refuse = 0;
  const output = new Writable({
    write(chunk: Buffer, _enc, cb) {
      if (refuse > 0) {
        refuse -= 1;
        return cb(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      }
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  return { input, output, lines, refuseNext: (n: number) => (refuse += n) };
}

channelConformance(
  'local',
  async () => {
    const t = terminal();
    return {
      jid: 'local:demo',
      makeChannel: () =>
        new LocalChannel({ folder: 'demo', input: t.input, output: t.output, sender: 'tester' }),
      async inject(text) {
        t.input.write(`${text}\n`);
        return { sender: 'tester', verb: 'message', platform_msg_id: null, content: text };
      },
      // Each reply is printed under the speaker's label (`demo › `), its next lines indented under it.
      received: () =>
        t.lines.map((l) => ({
          text: l
            .replace(/\n$/, '')
            .replace(/^demo › /, '')
            .replace(/\n {7}/g, '\n'),
          replyTo: null,
        })),
      failNext: (_fault, n) => t.refuseNext(n),
      retryAfterMs: 0,
      close: async () => {
        t.input.end();
      },
    };
  },
  // A terminal has no event ids to redeliver and no rate limits or server errors; a failed write is final.
  { redelivery: false, faults: ['forbidden'], drafts: false },
);

describe('local channel', () => {
  it('stores trimmed non-empty lines as the operating-system user and skips blank ones', async () => {
    const { db } = freshDb();
    const t = terminal();
    const rec = recordingSink(db);
    const ch = new LocalChannel({ folder: 'krons/content', input: t.input, output: t.output });
    await ch.start(rec.sink);
    t.input.write('  hello  \n\n   \r\nsecond line\r\n');
    await rec.waitCalls(2);
    await ch.stop();
    const me = userInfo().username;
    expect(inboundRows(db)).toMatchObject([
      { chat_jid: 'local:krons/content', sender: me, sender_name: me, content: 'hello', verb: 'message' },
      { chat_jid: 'local:krons/content', content: 'second line' },
    ]);
  });

  it('writes a reply as a line, keeps other chats for their own terminal, and fails once output is gone', async () => {
    const t = terminal();
    const ch = new LocalChannel({ folder: 'demo', input: t.input, output: t.output });
    const part = testPart('local:demo', { text: 'hi there' });
    await expect(ch.send(part)).resolves.toBeNull();
    expect(t.lines).toEqual(['demo › hi there\n']);
    const other = await ch.send({ ...part, chatJid: 'local:other' }).catch((e: DeliveryError) => e);
    expect(other).toMatchObject({ failure: 'transient' });
    t.output.end();
    const closed = await ch.send(part).catch((e: DeliveryError) => e);
    expect(closed).toMatchObject({ failure: 'permanent' });
  });

  it('labels who speaks: the group for its agent, gated for its own answers; a prompt on a terminal', async () => {
    const t = terminal();
    const ch = new LocalChannel({ folder: 'krons/content', input: t.input, output: t.output });
    await ch.send(testPart('local:krons/content', { text: 'line one\nline two' }));
    await ch.send({ ...testPart('local:krons/content', { text: 'pong' }), kind: 'gateway' });
    expect(t.lines).toEqual(['krons/content › line one\n                line two\n', 'gated › pong\n']);

    const tty = terminal();
    const prompted = new LocalChannel({ folder: 'demo', input: tty.input, output: tty.output, prompt: true });
    await prompted.start(() => null);
    expect(tty.lines).toEqual(['you › ']);
    await prompted.send(testPart('local:demo', { text: 'hi' }));
    // The reply clears the prompt's line, and the prompt comes back under it.
    expect(tty.lines[1]).toBe('\r\x1b[Kdemo › hi\nyou › ');
    await prompted.stop();
  });
});
