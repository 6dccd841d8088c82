/**
 * Message components and interactions for the local Discord server (test/infra/discord-api.ts), the way
 * Discord delivers them: a user's press on a button of a bot message is an INTERACTION_CREATE (type 3,
 * MESSAGE_COMPONENT) on the gateway, carrying the message, the component's `custom_id`, the presser
 * (`member.user` in a guild, `user` in a DM) and a one-time token; the bot answers it with
 * `POST /api/v10/interactions/{id}/{token}/callback` (no bot token: the interaction token is the proof),
 * within 3 s, once.
 */
import { randomBytes } from 'node:crypto';
import type { DiscordUser } from './discord-api.js';

type Json = Record<string, unknown>;

/** One button of a bot message, as the message's action rows hold it. */
export interface StoredButton {
  label: string;
  custom_id: string;
  style: number;
}

/** One press the server sent, and how the bot answered it. */
export interface Press {
  id: string;
  token: string;
  messageId: string;
  customId: string;
  user: DiscordUser;
  /** The callback type the bot answered with (6: deferred update), undefined while unanswered. */
  answeredWith: number | undefined;
  /** Callbacks received for this interaction (Discord accepts only the first). */
  callbacks: number;
}

/** The buttons of a message's `components` (action rows of buttons), in order; [] for none. */
export function buttonsOf(components: unknown): StoredButton[] {
  if (!Array.isArray(components)) return [];
  const out: StoredButton[] = [];
  for (const row of components as Json[]) {
    if (row.type !== 1 || !Array.isArray(row.components)) throw new Error('components: not an action row');
    for (const b of row.components as Json[]) {
      if (b.type !== 2) continue;
      const label = String(b.label ?? '');
      const custom_id = String(b.custom_id ?? '');
      if (custom_id === '' || custom_id.length > 100 || label.length > 80)
        throw new Error('components: bad button');
      out.push({ label, custom_id, style: Number(b.style) });
    }
  }
  return out;
}

/** The INTERACTION_CREATE payload of a press on `message`'s button `customId`. */
export function pressPayload(opts: {
  id: string;
  appId: string;
  guildId: string | undefined;
  channel: Json;
  message: Json;
  customId: string;
  user: DiscordUser;
}): { payload: Json; token: string } {
  const token = `itok-${randomBytes(12).toString('hex')}`;
  const who = opts.guildId
    ? {
        member: {
          user: opts.user,
          nick: null,
          roles: [],
          joined_at: new Date(0).toISOString(),
          deaf: false,
          mute: false,
          flags: 0,
          permissions: '0',
        },
      }
    : { user: opts.user };
  const payload: Json = {
    id: opts.id,
    application_id: opts.appId,
    type: 3,
    token,
    version: 1,
    channel_id: opts.channel.id,
    channel: opts.channel,
    ...(opts.guildId ? { guild_id: opts.guildId, guild_locale: 'en-US' } : {}),
    ...who,
    message: opts.message,
    data: { custom_id: opts.customId, component_type: 2 },
    app_permissions: '0',
    locale: 'en-US',
    entitlements: [],
    authorizing_integration_owners: opts.guildId ? { '0': opts.guildId } : { '1': opts.user.id },
    context: opts.guildId ? 0 : 1,
    attachment_size_limit: 10 * 1024 * 1024,
  };
  return { payload, token };
}

/**
 * Answers `POST /api/v10/interactions/{id}/{token}/callback`: 204 for the first answer with the right
 * token, 400 "already acknowledged" (code 40060) for a second, 404 (10062 Unknown interaction) otherwise.
 */
export function interactionCallback(
  presses: readonly Press[],
  path: string,
  body: Json,
): { status: number; body?: Json } | undefined {
  const m = /^\/api\/v10\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path);
  if (!m) return undefined;
  const press = presses.find((p) => p.id === m[1] && p.token === m[2]);
  if (!press) return { status: 404, body: { message: 'Unknown interaction', code: 10062 } };
  press.callbacks += 1;
  if (press.answeredWith !== undefined)
    return { status: 400, body: { message: 'Interaction has already been acknowledged.', code: 40060 } };
  press.answeredWith = Number(body.type);
  return { status: 204 };
}
