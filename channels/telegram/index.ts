import { Telegram, TelegramError } from 'telegraf';
import type { Update } from 'telegraf/types';
import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Jid } from '../../core/types.js';
import { abortableSleep, backoffDelay, type Sleep } from '../../core/backoff.js';
import type { Db } from '../../store/db.js';
import { whenWritable } from '../../store/group-commit.js';
import { botUsernameKey, getState, setState } from '../../store/state.js';
import type {
  ApprovalOps,
  Channel,
  DraftOps,
  FetchedFile,
  InboundSink,
  SendFile,
  SendPart,
} from '../channel.js';
import { Connection } from '../connection.js';
import { RowChannel } from '../row-channel.js';
import { fetchTelegramFile, sendTelegramFile } from './files.js';
import { telegramDrafts } from './drafts.js';
import { callbackToInbound, telegramApprovals } from './buttons.js';
import { ALLOWED_UPDATES, updateToInbound, type TelegramBotIdentity } from './map.js';
import { reactTelegram, roomOf, sendTelegramPart } from './send.js';

export { toDeliveryError } from './send.js';

/** router_state key of the next update id to ask for. */
export const TELEGRAM_OFFSET_KEY = 'telegram.offset';

/** What the Telegram channel needs. */
export interface TelegramChannelOptions {
  token: string;
  /** Bot API base (TELEGRAM_API_ROOT); default https://api.telegram.org. */
  apiRoot?: string;
  /** Where the update offset is kept (router_state). */
  db: Db;
  log: Logger;
  /** Long-poll hold in seconds. Default 30. */
  pollTimeoutS?: number;
  /** Waits between failed polls (tests inject it). */
  sleep?: Sleep;
  /** A send without an answer after this many ms is aborted and retried by delivery. Default 30000. */
  sendTimeoutMs?: number;
}

/**
 * Telegram through telegraf's Bot API client, by long polling. The poll loop is ours rather than
 * `bot.launch()`: it persists the offset in router_state after each batch is stored, so a restart neither
 * replays nor skips (an update replayed after a crash mid-batch is caught by the platform_msg_id dedup), and
 * it stops cleanly by aborting the held request.
 *
 * Groups, supergroups and DMs are `telegram:<chat id>`; a forum topic's thread id is the row's topic and
 * replies go back to that thread. In groups with privacy mode on, Telegram shows the bot only commands,
 * mentions and replies to it (see docs/CHANNELS.md).
 */
export class TelegramChannel extends RowChannel implements Channel {
  private readonly telegram: Telegram;
  readonly drafts: DraftOps;
  readonly approvals: ApprovalOps;
  private readonly log: Logger;
  private readonly sleep: Sleep;
  private bot: TelegramBotIdentity | undefined;
  private readonly connection: Connection;

  constructor(private readonly opts: TelegramChannelOptions) {
    super('telegram');
    // An apiRoot with a path must end in '/': telegraf resolves `./bot<token>/<method>` against it.
    const apiRoot = opts.apiRoot && !opts.apiRoot.endsWith('/') ? `${opts.apiRoot}/` : opts.apiRoot;
    this.telegram = new Telegram(opts.token, apiRoot ? { apiRoot } : {});
    this.drafts = telegramDrafts(this.telegram);
    this.approvals = telegramApprovals(this.telegram);
    this.log = opts.log;
    this.sleep = opts.sleep ?? abortableSleep;
    this.connection = new Connection({
      platform: 'telegram',
      log: opts.log,
      refused: isTokenRefused,
      refusedWhat: 'the bot token',
      sleep: this.sleep,
      backoff: { baseMs: 1000, maxMs: 30_000 },
    });
  }

  /** The bot's identity once started. */
  get identity(): TelegramBotIdentity | undefined {
    return this.bot;
  }

  /**
   * Learns who the bot is and begins polling. A refused token fails the start; an unreachable API does not:
   * the channel keeps trying in the background, so a gateway booted before the network still comes up.
   */
  async start(sink: InboundSink): Promise<void> {
    if (this.connection.busy) return;
    await this.connection.open(
      () => this.hello(),
      () => this.poll(sink, this.bot!),
    );
  }

  private async hello(): Promise<void> {
    const me = await this.telegram.getMe();
    // getUpdates answers 409 while a webhook is set; pending updates are kept.
    await this.telegram.callApi('deleteWebhook', { drop_pending_updates: false });
    this.bot = { id: me.id, username: me.username };
    setState(this.opts.db, botUsernameKey('telegram'), me.username);
    this.log.info({ bot: me.username }, 'telegram polling');
  }

  async stop(): Promise<void> {
    await this.connection.close();
  }

  private async poll(sink: InboundSink, bot: TelegramBotIdentity): Promise<void> {
    const signal = this.connection.signal;
    let offset = Number(getState(this.opts.db, TELEGRAM_OFFSET_KEY) ?? 0);
    let saved = offset;
    let failures = 0;
    while (!signal.aborted) {
      let updates: Update[];
      try {
        updates = await this.telegram.callApi(
          'getUpdates',
          { offset, timeout: this.opts.pollTimeoutS ?? 30, allowed_updates: [...ALLOWED_UPDATES] },
          // telegraf types the signal with an AbortController shim; node-fetch takes Node's own.
          { signal: signal as never },
        );
        failures = 0;
      } catch (err) {
        if (signal.aborted) break;
        const wait = this.pollErrorWait(err, ++failures);
        if (wait === undefined) return;
        await this.sleep(wait, signal);
        continue;
      }
      try {
        for (const u of updates) {
          await this.store(u, bot, sink);
          offset = u.update_id + 1;
        }
      } catch (err) {
        // The store failed (database locked, disk full): keep the offset at the update that failed, so it
        // is asked for again after a pause instead of being skipped.
        this.log.error({ err: coerceError(err).message, offset }, 'telegram update not stored; retrying');
        await this.sleep(backoffDelay(++failures), signal);
      } finally {
        if (offset !== saved) {
          const next = String((saved = offset));
          await whenWritable(this.opts.db, () => setState(this.opts.db, TELEGRAM_OFFSET_KEY, next));
        }
      }
    }
  }

  private async store(u: Update, bot: TelegramBotIdentity, sink: InboundSink): Promise<void> {
    let msg;
    try {
      msg = 'callback_query' in u ? this.pressed(u) : updateToInbound(u, bot);
    } catch (err) {
      // An update shape we do not understand must not stall the chat behind it.
      this.log.warn({ update: u.update_id, err: coerceError(err).message }, 'telegram update skipped');
      return;
    }
    if (msg) await sink(msg);
  }

  /** A button press: its row, and the acknowledgement Telegram wants (best effort: the row is what counts). */
  private pressed(u: Update.CallbackQueryUpdate) {
    this.telegram
      .callApi('answerCallbackQuery', { callback_query_id: u.callback_query.id })
      .catch((err: unknown) =>
        this.log.debug({ err: coerceError(err).message }, 'answerCallbackQuery failed'),
      );
    return callbackToInbound(u);
  }

  /** How long to wait after a failed getUpdates, or undefined when polling cannot go on. */
  private pollErrorWait(err: unknown, failures: number): number | undefined {
    if (err instanceof TelegramError) {
      if (isTokenRefused(err)) {
        this.log.error({ code: err.code }, 'telegram refused the bot token; polling stopped');
        return undefined;
      }
      if (err.code === 429) return (err.parameters?.retry_after ?? 1) * 1000;
      if (err.code === 409) this.log.warn('telegram: another getUpdates or a webhook is active for this bot');
    }
    const wait = backoffDelay(failures, { baseMs: 1000, maxMs: 30_000 });
    this.log.warn({ err: coerceError(err).message, waitMs: wait }, 'telegram poll failed');
    return wait;
  }

  async send(part: SendPart): Promise<string | null> {
    return sendTelegramPart(this.telegram, part, this.opts.sendTimeoutMs ?? 30_000);
  }

  async sendFile(file: SendFile): Promise<string | null> {
    return sendTelegramFile(this.telegram, file);
  }

  async fetchAttachment(source: string, maxBytes: number): Promise<FetchedFile> {
    return fetchTelegramFile(this.telegram, source, maxBytes);
  }

  async react(chatJid: Jid, messageId: string, emoji: string): Promise<void> {
    return reactTelegram(this.telegram, chatJid, messageId, emoji, this.opts.sendTimeoutMs ?? 30_000);
  }

  async typing(chatJid: Jid, on: boolean): Promise<void> {
    if (!on) return; // Telegram's typing status ends by itself after 5 s or with the next message.
    try {
      await this.telegram.sendChatAction(roomOf(chatJid), 'typing');
    } catch (err) {
      this.log.debug({ chat: chatJid, err: coerceError(err).message }, 'telegram typing failed');
    }
  }
}

/** 401, or 404 for a token of the wrong shape: retrying cannot help. */
function isTokenRefused(err: unknown): boolean {
  return err instanceof TelegramError && (err.code === 401 || err.code === 404);
}
