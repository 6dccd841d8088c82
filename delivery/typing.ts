import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Signals } from '../core/signals.js';
import { parseJid } from '../core/types.js';
import type { Channel } from '../channels/channel.js';

/** Telegram shows "typing" for about 5 s after each sendChatAction: renew it a little sooner. */
export const TYPING_RENEW_MS = 4000;

/** Keeps typing indicators up while a chat's agent works (the `working` signal). */
export interface TypingKeeper {
  set(chatJid: string, working: boolean): void;
  /** Hides every indicator and stops renewing. */
  stop(): void;
}

/** What the typing keeper needs. */
export interface TypingOptions {
  /** The channels that started: a chat of another platform, or of one without typing, is skipped. */
  channels: readonly Channel[];
  log: Logger;
  /** When given, the keeper follows `working` (the scheduler and the run recorder fire it) until `stop`. */
  signals?: Pick<Signals, 'working'>;
  /** Default TYPING_RENEW_MS. */
  renewMs?: number;
}

/**
 * Shows typing in a chat while its agent works, renewed every `renewMs` on platforms whose indicator
 * expires by itself, hidden when the agent has answered. Best effort: an indicator never fails a run.
 */
export function createTypingKeeper(opts: TypingOptions): TypingKeeper {
  const { channels, log } = opts;
  const renewMs = opts.renewMs ?? TYPING_RENEW_MS;
  const timers = new Map<string, NodeJS.Timeout>();
  const show = (channel: Channel, chatJid: string, on: boolean) => {
    channel.typing?.(chatJid, on).catch((err: unknown) => {
      log.debug({ chat: chatJid, err: coerceError(err).message }, 'typing indicator failed');
    });
  };
  const channelOf = (chatJid: string) => {
    const platform = parseJid(chatJid).platform;
    return channels.find((c) => c.platform === platform && c.typing);
  };
  const keeper: TypingKeeper = {
    set(chatJid, on) {
      const channel = channelOf(chatJid);
      if (!channel) return;
      const timer = timers.get(chatJid);
      if (on) {
        if (timer) return;
        show(channel, chatJid, true);
        const t = setInterval(() => show(channel, chatJid, true), renewMs);
        t.unref();
        timers.set(chatJid, t);
      } else if (timer) {
        clearInterval(timer);
        timers.delete(chatJid);
        show(channel, chatJid, false);
      }
    },
    stop() {
      unlisten?.();
      for (const t of timers.values()) clearInterval(t);
      timers.clear();
    },
  };
  const unlisten = opts.signals?.working.on(({ chatJid, on }) => keeper.set(chatJid, on));
  return keeper;
}
