/**
 * The dashboard's chat view and its audio over real HTTP (docs/VOICE.md): a chat's rows carry their audio
 * files (a voice message's upload, a spoken reply) and the transcript mark; `/api/dashboard/audio` serves
 * only audio, from inside the row's group folder, through no link, sandboxed.
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { insertOutboundFiles } from '../../store/outbound-files.js';
import { tempDir } from '../helpers/db.js';
import { getJson, startWebServer } from './harness.js';

it('lists the audio of a chat beside its transcript and serves only audio, from inside the group folder', async () => {
  const s = await startWebServer();
  const demo = join(s.groupsDir, 'demo');
  mkdirSync(join(demo, 'inbox', 'v'), { recursive: true });
  mkdirSync(join(demo, 'outbox', 'spoken'), { recursive: true });
  writeFileSync(join(demo, 'inbox', 'v', 'voice.ogg'), 'OggS the voice message');
  writeFileSync(join(demo, 'outbox', 'spoken', 'reply.ogg'), 'OggS the spoken reply');
  writeFileSync(join(demo, 'outbox', 'page.html'), '<script>alert(1)</script>');
  const outside = join(tempDir('gated-outside-'), 'secret.ogg');
  writeFileSync(outside, 'secret');
  symlinkSync(outside, join(demo, 'outbox', 'link.ogg'));

  const voice = Number(
    s.db
      .prepare(
        `INSERT INTO messages (chat_jid, sender, content, is_from_me, group_folder, state, transcript)
         VALUES ('web:demo', 'v1', 'please check the weather', 0, 'demo', 'done', 1)`,
      )
      .run().lastInsertRowid,
  );
  s.db
    .prepare(
      `INSERT INTO attachments (message_id, seq, kind, name, mime, size, source, state, path)
       VALUES (?, 0, 'audio', 'voice.ogg', 'audio/ogg', 22, 'upload:x', 'saved', 'inbox/v/voice.ogg')`,
    )
    .run(voice);
  const reply = Number(
    s.db
      .prepare(
        `INSERT INTO messages (chat_jid, sender, content, is_from_me, delivery, kind, reply_to_id)
         VALUES ('web:demo', 'gated', 'it will rain', 1, 'sent', 'reply', ?)`,
      )
      .run(voice).lastInsertRowid,
  );
  const file = (path: string, mime: string) => ({
    path,
    abs: join(demo, path),
    name: path.split('/').pop()!,
    mime,
    refused: null,
  });
  insertOutboundFiles(s.db, reply, [
    file('outbox/spoken/reply.ogg', 'audio/ogg'),
    file('outbox/page.html', 'text/html'),
    file('outbox/link.ogg', 'audio/ogg'),
  ]);

  const chat = await getJson(`${s.url}/api/dashboard/chat?jid=web:demo`);
  const rows = chat.body.messages as Array<{ id: number; transcript: number; audio?: unknown[] }>;
  expect(rows.find((r) => r.id === voice)).toMatchObject({
    transcript: 1,
    audio: [{ seq: 0, name: 'voice.ogg', mime: 'audio/ogg' }],
  });
  expect(rows.find((r) => r.id === reply)!.audio).toEqual([
    { seq: 0, name: 'reply.ogg', mime: 'audio/ogg' },
    { seq: 2, name: 'link.ogg', mime: 'audio/ogg' },
  ]);

  const get = (id: number, seq: number) => fetch(`${s.url}/api/dashboard/audio?id=${id}&seq=${seq}`);
  const heard = await get(voice, 0);
  expect(heard.status).toBe(200);
  expect(heard.headers.get('content-type')).toBe('audio/ogg');
  expect(heard.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
  expect(await heard.text()).toBe('OggS the voice message');
  const spoken = await get(reply, 0);
  expect(await spoken.text()).toBe('OggS the spoken reply');
  // Not audio: never served here, whatever the row says.
  expect((await get(reply, 1)).status).toBe(404);
  // A link the agent planted in its folder is refused, not followed.
  const link = await get(reply, 2);
  expect(link.status).toBe(403);
  expect(await link.text()).not.toContain('secret');
  expect((await get(reply, 9)).status).toBe(404);
  expect((await fetch(`${s.url}/api/dashboard/audio?id=x`)).status).toBe(400);
});
