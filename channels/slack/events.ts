import { createHmac, timingSafeEqual } from 'node:crypto';
import { coerceError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { InboundSink, WebhookHandler } from '../channel.js';
import {
  eventToInbound,
  pressToInbound,
  type SlackBlockActions,
  type SlackMessageEvent,
  type SlackSelf,
} from './map.js';

/** How far a signed request's timestamp may be from now: Slack's own advice, against replays. */
export const SIGNATURE_WINDOW_S = 5 * 60;

/**
 * Checks Slack's request signature: `X-Slack-Signature` must be `v0=` + HMAC-SHA256 of
 * `v0:<X-Slack-Request-Timestamp>:<raw body>` with the signing secret, and the timestamp within five
 * minutes of now. Compared in constant time. Returns the reason for a refusal, or null.
 */
export function checkSlackSignature(
  secret: string,
  headers: Headers,
  body: string,
  nowMs: number = Date.now(),
): string | null {
  const ts = headers.get('x-slack-request-timestamp') ?? '';
  const sig = headers.get('x-slack-signature') ?? '';
  if (!/^\d+$/.test(ts) || !sig.startsWith('v0=')) return 'missing signature';
  if (Math.abs(nowMs / 1000 - Number(ts)) > SIGNATURE_WINDOW_S) return 'stale timestamp';
  const want = Buffer.from(`v0=${createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex')}`);
  const got = Buffer.from(sig);
  return got.length === want.length && timingSafeEqual(got, want) ? null : 'bad signature';
}

/** What handling an Events API or interaction payload needs. */
export interface SlackInbound {
  sink: InboundSink;
  self: () => SlackSelf | undefined;
  log: Logger;
}

/**
 * Stores what one Events API callback or interaction carries. Rejects when the store fails, so the caller
 * withholds its ack (Socket Mode) or its 2xx (HTTP) and Slack delivers the event again.
 */
export async function handleSlackPayload(
  body: unknown,
  kind: 'events_api' | 'interactive',
  io: SlackInbound,
): Promise<void> {
  const self = io.self();
  if (!self) throw new Error('slack channel not started');
  const b = body as { type?: string; event?: SlackMessageEvent } | null;
  if (kind === 'interactive') {
    const press = pressToInbound(body as SlackBlockActions);
    if (press) await io.sink(press);
    else io.log.debug({ type: b?.type }, 'slack interaction ignored: not an approval button');
    return;
  }
  if (b?.type !== 'event_callback' || !b.event) return;
  const msg = eventToInbound(b.event, self);
  if (msg) await io.sink(msg);
}

/**
 * The HTTP Events API endpoint (`/hooks/slack`): the signature is checked on the raw body before anything
 * is parsed (401 and nothing stored when it fails); `url_verification` is answered with its challenge;
 * interactions arrive form-encoded (`payload=`). The event is stored before the 200, so a crash before it
 * means Slack retries, and the retry (same message ts) is stored once.
 */
export function slackWebhook(secret: string, io: SlackInbound, now: () => number = Date.now): WebhookHandler {
  return async (req) => {
    if (req.method !== 'POST') return new Response('method not allowed', { status: 405 });
    const raw = await req.text();
    const refused = checkSlackSignature(secret, req.headers, raw, now());
    if (refused) {
      io.log.warn({ reason: refused }, 'slack request refused');
      return Response.json({ error: refused }, { status: 401 });
    }
    let body: unknown;
    let kind: 'events_api' | 'interactive' = 'events_api';
    try {
      if ((req.headers.get('content-type') ?? '').startsWith('application/x-www-form-urlencoded')) {
        body = JSON.parse(new URLSearchParams(raw).get('payload') ?? 'null');
        kind = 'interactive';
      } else body = JSON.parse(raw);
    } catch {
      return Response.json({ error: 'body is not JSON' }, { status: 400 });
    }
    const b = body as { type?: string; challenge?: string } | null;
    if (b?.type === 'url_verification') return Response.json({ challenge: b.challenge ?? '' });
    try {
      await handleSlackPayload(body, kind, io);
    } catch (err) {
      io.log.error({ err: coerceError(err).message }, 'slack event not stored; slack will retry');
      return Response.json({ error: 'not stored' }, { status: 503 });
    }
    return new Response(null, { status: 200 });
  };
}
