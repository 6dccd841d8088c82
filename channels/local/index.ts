import { userInfo } from 'node:os';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { DeliveryError } from '../../core/errors.js';
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
 * two messages. Deliver with `only: (jid) => jid === channel.jid`: other terminals own other local chats.
 */
export class LocalChannel implements Channel {
  readonly platform = 'local';
  readonly limitUnit = 'chars' as const;
  readonly limit: number;
  readonly jid: Jid;
  private readonly sender: string;
  private rl: Interface | undefined;
  private outputError: Error | undefined;

  constructor(private readonly opts: LocalChannelOptions) {
    this.jid = localJid(opts.folder);
    this.limit = opts.limit ?? 65_536;
    this.sender = opts.sender ?? osUser();
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
      sink({ chat_jid: this.jid, sender: this.sender, sender_name: this.sender, content, verb: 'message' });
    });
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
    await new Promise<void>((resolve, reject) => {
      out.write(`${part.text}\n`, (err) =>
        err ? reject(new DeliveryError('permanent', `terminal write failed: ${err.message}`)) : resolve(),
      );
    });
    return null;
  }
}
