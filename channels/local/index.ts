import { PLATFORMS } from '../../core/platforms.js';
import { userInfo } from 'node:os';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { coerceError, DeliveryError } from '../../core/errors.js';
import type { Jid } from '../../core/types.js';
import type { Channel, InboundSink, SendPart } from '../channel.js';

/** How `gated chat` connects a terminal to one group. */
export interface LocalChannelOptions {
  /** The group folder this terminal talks to; the chat is `local:<folder>`. */
  folder: string;
  /** Lines typed by the user. */
  input: Readable;
  /** Where replies are written, one part per line block. */
  output: Writable;
  /** The sender id of typed lines. Default: the operating-system user name. */
  sender?: string;
  /** Longest part written at once, in characters. Default 65536. */
  limit?: number;
  /** Show a `you › ` prompt before each line typed. Default: when the input is a terminal. */
  prompt?: boolean;
}

/** The prompt before a typed line. */
export const PROMPT = 'you › ';

/**
 * A reply as the terminal prints it: the speaker's label on its first line (the group's folder for the
 * agent, `gated` for the gateway's own answers and errors) and the next lines indented under the text.
 */
export function labelled(folder: string, kind: string | null | undefined, text: string): string {
  const label = `${kind === 'gateway' || kind === 'error' ? 'gated' : folder} › `;
  return label + text.split('\n').join('\n' + ' '.repeat(label.length));
}

/** The JID of a group's terminal chat. */
export function localJid(folder: string): Jid {
  return `local:${folder}`;
}

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    // A uid without a passwd entry (containers) has no name; the chat still works.
    return 'local';
  }
}

/**
 * The terminal chat: every non-empty typed line becomes an inbound row of `local:<folder>`, and replies are
 * written to the output. Lines have no platform id (a terminal cannot redeliver), so two equal lines are
 * two messages. Deliver with `only: [channel.jid]`: other terminals own other local chats.
 */
export class LocalChannel implements Channel {
  readonly platform = 'local';
  readonly limitUnit = PLATFORMS.local.limitUnit;
  readonly textFormat = PLATFORMS.local.textFormat;
  readonly limit: number;
  readonly jid: Jid;
  private readonly sender: string;
  private rl: Interface | undefined;
  private outputError: Error | undefined;
  private readonly prompt: boolean;

  constructor(private readonly opts: LocalChannelOptions) {
    this.jid = localJid(opts.folder);
    this.limit = opts.limit ?? PLATFORMS.local.limit;
    this.sender = opts.sender ?? osUser();
    this.prompt = opts.prompt ?? (opts.input as { isTTY?: boolean }).isTTY === true;
    // A closed terminal must fail the send, not crash the process with an unhandled 'error' event.
    opts.output.on('error', (err: Error) => {
      this.outputError = err;
    });
  }

  async start(sink: InboundSink): Promise<void> {
    if (this.rl) return;
    this.rl = createInterface({
      input: this.opts.input,
      crlfDelay: Number.POSITIVE_INFINITY,
      terminal: false,
    });
    this.rl.on('line', (line) => {
      const content = line.trim();
      if (content === '') return;
      const row = {
        chat_jid: this.jid,
        sender: this.sender,
        sender_name: this.sender,
        content,
        verb: 'message',
      };
      // Said in the terminal, where the line was typed: it is not in the chat, and typing it again is safe.
      Promise.resolve()
        .then(() => sink(row))
        .catch((err: unknown) =>
          this.opts.output.write(`(not stored: ${coerceError(err).message}; type it again)\n`),
        );
      this.showPrompt();
    });
    this.showPrompt();
  }

  private showPrompt(): void {
    const out = this.opts.output;
    if (this.prompt && !out.destroyed && !out.writableEnded) out.write(PROMPT);
  }

  async stop(): Promise<void> {
    this.rl?.close();
    this.rl = undefined;
  }

  async send(part: SendPart): Promise<string | null> {
    if (part.chatJid !== this.jid) {
      // A wiring mistake (delivery without `only`): keep the row for the terminal that owns it.
      throw new DeliveryError('transient', `local channel of ${this.jid} cannot deliver to ${part.chatJid}`);
    }
    const out = this.opts.output;
    // A stream that failed once never writes again, so every output failure is permanent for this row.
    if (this.outputError || out.destroyed || out.writableEnded) {
      throw new DeliveryError(
        'permanent',
        `terminal output closed${this.outputError ? `: ${this.outputError.message}` : ''}`,
      );
    }
    // On a prompt, the reply starts on a line of its own and the prompt comes back under it.
    const text = labelled(this.opts.folder, part.kind, part.text);
    const framed = this.prompt ? `\r\x1b[K${text}\n${PROMPT}` : `${text}\n`;
    await new Promise<void>((resolve, reject) => {
      out.write(framed, (err) =>
        err ? reject(new DeliveryError('permanent', `terminal write failed: ${err.message}`)) : resolve(),
      );
    });
    return null;
  }
}
