import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Signals } from '../core/signals.js';
import { platformRow } from '../core/platforms.js';
import { parseJid } from '../core/types.js';
import type { Channel } from '../channels/channel.js';

/** Keeps typing indicators up while a chat's agent works (the `working` signal). */
export interface TypingKeeper {
  set(chatJid: string, working: boolean): void;
  /** Stops following `working` and renewing; an indicator still up expires by itself (it is not hidden). */
  stop(): void;
}

/** What the typing keeper needs. */
export interface TypingOptions {
  /** The channels that started: a chat of another platform, or of one without typing, is skipped. */
  channels: readonly Channel[];
  log: Logger;
  /** When given, the keeper follows `working` (the scheduler and the run recorder fire it) until `stop`. */
  signals?: Pick<Signals, 'working'>;
  /** How often an indicator is sent again; default the platform row's `typingRenewMs` (core/platforms.ts). */
  renewMs?: number;
}

/**
 * Shows typing in a chat while its agent works, renewed as often as its platform's row says (an indicator
 * that expires by itself), hidden when the agent has answered. Best effort: an indicator never fails a run.
 */
export function createTypingKeeper(opts: TypingOptions): TypingKeeper {
  const { channels, log } = opts;
  // A chat whose indicator is up: its renewal timer, or null where its platform needs none.
  const timers = new Map<string, NodeJS.Timeout | null>();
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
      const up = timers.has(chatJid);
      if (on) {
        if (up) return;
        show(channel, chatJid, true);
        const renewMs = opts.renewMs ?? platformRow(channel.platform)?.typingRenewMs ?? null;
        const t = renewMs === null ? null : setInterval(() => show(channel, chatJid, true), renewMs);
        t?.unref();
        timers.set(chatJid, t);
      } else if (up) {
        const timer = timers.get(chatJid);
        if (timer) clearInterval(timer);
        timers.delete(chatJid);
        show(channel, chatJid, false);
      }
    },
    stop() {
      unlisten?.();
      for (const t of timers.values()) if (t) clearInterval(t);
      timers.clear();
    },
  };
  const unlisten = opts.signals?.working.on(({ chatJid, on }) => keeper.set(chatJid, on));
  return keeper;
}
