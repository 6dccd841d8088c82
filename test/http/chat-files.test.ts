/**
 * The web chat's files and drafts over real HTTP: uploads (limits, hostile names, Origin), the inbox
 * downloader saving an upload into the group's folder, the file endpoint (only this chat's files, only from
 * inside the group folder), history with files, and drafts over SSE.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createInbox } from '../../channels/inbox.js';
import { CHAT_LINE_MAX, type ChatLine } from '../../channels/web/index.js';
import { insertOutboundFiles } from '../../store/outbound-files.js';
import { until } from '../helpers/process.js';
import { tempDir } from '../helpers/db.js';
import { getJson, startWebServer, visit, type WebServer } from './harness.js';
import { SseClient } from './sse-client.js';

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
);

function form(fields: Record<string, string>, files: Array<{ name: string; data: Buffer; type?: string }>) {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  for (const file of files) f.append('file', new Blob([file.data], { type: file.type ?? '' }), file.name);
  return f;
}

async function upload(s: WebServer, body: FormData, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}/api/chat/upload`, { method: 'POST', body, headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

interface AttachmentRow {
  name: string;
  mime: string;
  size: number;
  source: string;
  state: string;
  path: string | null;
}

const attachments = (s: WebServer, id: number) =>
  s.db
    .prepare(
      `SELECT name, mime, size, source, state, path FROM attachments WHERE message_id = ? ORDER BY seq`,
    )
    .all(id) as AttachmentRow[];

/** An outbound row of web:demo answering inbound row `to`, with files as the queue records them. */
function replyWithFiles(s: WebServer, to: number | null, files: Array<{ path: string; abs: string }>) {
  const id = Number(
    s.db
      .prepare(
        `INSERT INTO messages (chat_jid, sender, content, is_from_me, delivery, kind, reply_to_id)
         VALUES ('web:demo', 'gated', 'here you go', 1, 'sent', 'reply', ?)`,
      )
      .run(to).lastInsertRowid,
  );
  insertOutboundFiles(
    s.db,
    id,
    files.map((f) => ({
      path: f.path,
      abs: f.abs,
      name: f.path.split('/').pop()!,
      mime: mimeFor(f.path),
      refused: null,
    })),
  );
  return id;
}

const mimeFor = (p: string) =>
  p.endsWith('.png')
    ? 'image/png'
    : p.endsWith('.html')
      ? 'text/html'
      : p.endsWith('.ogg')
        ? 'audio/ogg'
        : 'text/plain';

describe('web chat uploads', () => {
  it('stores the message with its files staged, and the inbox saves them into the group folder', async () => {
    const s = await startWebServer();
    const me = await visit(s.url);
    const r = await upload(
      s,
      form({ group: 'demo', content: 'look', clientMsgId: 'm1' }, [
        { name: 'cat.png', data: PNG, type: 'image/png' },
      ]),
      me.headers,
    );
    expect(r.status).toBe(201);
    const id = r.body.id as number;
    expect(r.body.files).toEqual([
      { seq: 0, name: 'cat.png', mime: 'image/png', size: PNG.length, ready: false },
    ]);
    const [a] = attachments(s, id);
    expect(a).toMatchObject({ name: 'cat.png', mime: 'image/png', size: PNG.length, state: 'pending' });
    expect(a!.source).toMatch(/^upload:[0-9a-f-]{36}$/);
    // The same post again (a retried request) is stored once, and its second copy is not kept.
    const again = await upload(
      s,
      form({ group: 'demo', content: 'look', clientMsgId: 'm1' }, [
        { name: 'cat.png', data: PNG, type: 'image/png' },
      ]),
      me.headers,
    );
    expect(again).toEqual({ status: 200, body: { id: null, duplicate: true } });

    // The gateway routes web:demo to demo; the inbox then fetches the upload through the channel.
    s.db.prepare(`UPDATE messages SET group_folder = 'demo' WHERE id = ?`).run(id);
    const inbox = createInbox({
      db: s.db,
      channels: [s.web],
      groupsDir: s.groupsDir,
      maxBytes: 1024 * 1024,
      log: silentLogger(),
    });
    inbox.start();
    await until(() => attachments(s, id)[0]!.state === 'saved');
    await inbox.stop();
    const saved = attachments(s, id)[0]!;
    expect(saved.path).toBe(`inbox/${id}/0-cat.png`);
    expect(readFileSync(join(s.groupsDir, 'demo', saved.path!)).equals(PNG)).toBe(true);

    // History lists the upload, ready now, and the file endpoint serves it inline as an image.
    const h = await getJson(`${s.url}/api/chat/history?group=demo`);
    const line = (h.body.lines as ChatLine[]).find((l) => l.id === id)!;
    expect(line.files).toEqual([
      { seq: 0, name: 'cat.png', mime: 'image/png', size: PNG.length, ready: true },
    ]);
    const res = await fetch(`${s.url}/api/chat/file?group=demo&id=${id}&seq=0`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer()).equals(PNG)).toBe(true);
  });

  it('sanitises hostile file names and types', async () => {
    const s = await startWebServer();
    const r = await upload(
      s,
      form({ group: 'demo' }, [
        { name: '../../etc/passwd', data: Buffer.from('x') },
        { name: '..', data: Buffer.from('y'), type: 'text/html; charset=utf-8"><script>' },
        { name: 'invoice\u202Egpj.exe', data: Buffer.from('z'), type: 'application/pdf' },
      ]),
    );
    expect(r.status).toBe(201);
    const rows = attachments(s, r.body.id as number);
    expect(rows.map((a) => a.name)).toEqual(['passwd', 'file', 'invoice_gpj.exe']);
    // A type the browser claimed that is not a plain type/subtype is replaced by the name's.
    expect(rows.map((a) => a.mime)).toEqual([
      'application/octet-stream',
      'application/octet-stream',
      'application/pdf',
    ]);
  });

  it('refuses uploads over GATED_MAX_ATTACHMENT_BYTES, without files, of other types or from other sites', async () => {
    const s = await startWebServer({ maxAttachmentBytes: 1000 });
    const big = await upload(s, form({ group: 'demo' }, [{ name: 'big.bin', data: Buffer.alloc(1001) }]));
    expect(big.status).toBe(413);
    expect(big.body.error).toBe('files of 1001 bytes are over the limit of 1000 bytes');
    const two = await upload(
      s,
      form({ group: 'demo' }, [
        { name: 'a.bin', data: Buffer.alloc(600) },
        { name: 'b.bin', data: Buffer.alloc(600) },
      ]),
    );
    expect(two.status).toBe(413);
    const none = await upload(s, form({ group: 'demo', content: 'no file' }, []));
    expect(none).toEqual({ status: 400, body: { error: 'no file in the field "file"' } });
    const json = await fetch(`${s.url}/api/chat/upload`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(json.status).toBe(415);
    const nogroup = await upload(s, form({ group: 'nope' }, [{ name: 'a.txt', data: Buffer.from('a') }]));
    expect(nogroup.status).toBe(404);
    const foreign = await upload(s, form({ group: 'demo' }, [{ name: 'a.txt', data: Buffer.from('a') }]), {
      Origin: 'https://attacker.example',
    });
    expect(foreign.status).toBe(403);
    // Far past the limit: the body is cut off as it arrives (the limit plus room for the form's fields).
    // Last: the server closes that connection without reading the rest of the body.
    const huge = await upload(
      s,
      form({ group: 'demo' }, [{ name: 'huge.bin', data: Buffer.alloc(2_000_000) }]),
    );
    expect(huge).toEqual({ status: 413, body: { error: 'upload over the limit of 1000 bytes' } });
    expect(s.db.prepare(`SELECT count(*) FROM messages`).pluck().get()).toBe(0);
    expect(s.db.prepare(`SELECT count(*) FROM attachments`).pluck().get()).toBe(0);
  });
});

describe('web chat uploads, parsed as a stream (http/multipart.ts)', () => {
  it('refuses a ninth file and an unreadable body, and leaves nothing staged', async () => {
    const s = await startWebServer();
    const nine = Array.from({ length: 9 }, (_, i) => ({ name: `f${i}.txt`, data: Buffer.from(`file ${i}`) }));
    const many = await upload(s, form({ group: 'demo' }, nine));
    expect(many).toEqual({ status: 400, body: { error: 'at most 8 files per message' } });
    // A multipart type whose body never has the boundary it names, cut off mid-part.
    const res = await fetch(`${s.url}/api/chat/upload`, {
      method: 'POST',
      headers: { 'Content-Type': 'multipart/form-data; boundary=xyz' },
      body: '--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nno end',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^unreadable multipart body: /);
    const noBoundary = await fetch(`${s.url}/api/chat/upload`, {
      method: 'POST',
      headers: { 'Content-Type': 'multipart/form-data' },
      body: 'x',
    });
    expect(noBoundary.status).toBe(400);
    expect(readdirSync(s.web.uploads.dir).filter((n) => !n.startsWith('.'))).toEqual([]);
    expect(s.db.prepare(`SELECT count(*) FROM messages`).pluck().get()).toBe(0);
  });

  it('stores a file of a name in UTF-8 with its bytes intact, several files in order', async () => {
    const s = await startWebServer();
    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    big.write('end', big.length - 3);
    const r = await upload(
      s,
      form({ group: 'demo', content: 'två filer' }, [
        { name: 'räksmörgås.bin', data: big },
        { name: 'b.txt', data: Buffer.from('second') },
      ]),
    );
    expect(r.status).toBe(201);
    const rows = attachments(s, r.body.id as number);
    expect(rows.map((a) => [a.name, a.size])).toEqual([
      ['räksmörgås.bin', big.length],
      ['b.txt', 6],
    ]);
    const staged = await s.web.uploads.read(rows[0]!.source, 10 * 1024 * 1024);
    expect(createHash('sha256').update(staged.data).digest('hex')).toBe(
      createHash('sha256').update(big).digest('hex'),
    );
  });
});

describe('web chat file endpoint', () => {
  it("serves a reply's files from the group folder: images inline, anything else as a sandboxed download", async () => {
    const s = await startWebServer();
    const dir = join(s.groupsDir, 'demo', 'out');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'chart.png'), PNG);
    writeFileSync(join(dir, 'page.html'), '<script>alert(1)</script>');
    writeFileSync(join(dir, 'reply.ogg'), 'OggS not really opus');
    const id = replyWithFiles(s, null, [
      { path: 'out/chart.png', abs: join(dir, 'chart.png') },
      { path: 'out/page.html', abs: join(dir, 'page.html') },
      { path: 'out/reply.ogg', abs: join(dir, 'reply.ogg') },
    ]);
    const img = await fetch(`${s.url}/api/chat/file?group=demo&id=${id}&seq=0`);
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/png');
    expect(img.headers.get('content-disposition')).toBe("inline; filename*=UTF-8''chart.png");
    expect(
      createHash('sha256')
        .update(Buffer.from(await img.arrayBuffer()))
        .digest('hex'),
    ).toBe(createHash('sha256').update(PNG).digest('hex'));
    const html = await fetch(`${s.url}/api/chat/file?group=demo&id=${id}&seq=1`);
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toBe('application/octet-stream');
    expect(html.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''page.html");
    expect(html.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
    expect(await html.text()).toBe('<script>alert(1)</script>');
    // A spoken reply plays in the page's <audio> element (docs/VOICE.md): its own type, inline.
    const ogg = await fetch(`${s.url}/api/chat/file?group=demo&id=${id}&seq=2`);
    expect(ogg.headers.get('content-type')).toBe('audio/ogg');
    expect(ogg.headers.get('content-disposition')).toBe("inline; filename*=UTF-8''reply.ogg");
    expect(await ogg.text()).toBe('OggS not really opus');
    // History shows the files with the reply.
    const h = await getJson(`${s.url}/api/chat/history?group=demo`);
    expect((h.body.lines as ChatLine[])[0]!.files!.map((f) => [f.name, f.ready])).toEqual([
      ['chart.png', true],
      ['page.html', true],
      ['reply.ogg', true],
    ]);
  });

  it('refuses files outside the group folder, of other chats, and path traversal', async () => {
    const s = await startWebServer({ groups: ['demo', 'other'] });
    const outside = join(tempDir('gated-outside-'), 'secret.txt');
    writeFileSync(outside, 'secret');
    const demo = join(s.groupsDir, 'demo');
    mkdirSync(join(demo, 'out'), { recursive: true });
    mkdirSync(join(s.groupsDir, 'other'), { recursive: true });
    // A symlink inside the folder that leads out of it, and a row naming an outside path directly.
    symlinkSync(outside, join(demo, 'out', 'link.txt'));
    const viaLink = replyWithFiles(s, null, [{ path: 'out/link.txt', abs: join(demo, 'out', 'link.txt') }]);
    const direct = replyWithFiles(s, null, [{ path: '../../secret.txt', abs: outside }]);
    for (const id of [viaLink, direct]) {
      const res = await fetch(`${s.url}/api/chat/file?group=demo&id=${id}&seq=0`);
      expect(res.status).toBe(403);
      expect(await res.text()).not.toContain('secret');
    }
    // An inbound attachment whose stored path climbs out of the folder.
    const inbound = Number(
      s.db
        .prepare(
          `INSERT INTO messages (chat_jid, sender, content, group_folder) VALUES ('web:demo', 'u', 'x', 'demo')`,
        )
        .run().lastInsertRowid,
    );
    s.db
      .prepare(
        `INSERT INTO attachments (message_id, seq, kind, name, source, state, path)
         VALUES (?, 0, 'document', 'secret.txt', 'upload:x', 'saved', ?)`,
      )
      .run(inbound, `../../../..${outside}`);
    expect((await fetch(`${s.url}/api/chat/file?group=demo&id=${inbound}&seq=0`)).status).toBe(403);
    // A file of web:demo asked for as another group's chat is unknown there; so are bad parameters.
    writeFileSync(join(demo, 'out', 'ok.txt'), 'ok');
    const ok = replyWithFiles(s, null, [{ path: 'out/ok.txt', abs: join(demo, 'out', 'ok.txt') }]);
    expect((await fetch(`${s.url}/api/chat/file?group=demo&id=${ok}&seq=0`)).status).toBe(200);
    expect((await fetch(`${s.url}/api/chat/file?group=other&id=${ok}&seq=0`)).status).toBe(404);
    expect((await fetch(`${s.url}/api/chat/file?group=demo&id=${ok}&seq=1`)).status).toBe(404);
    expect((await fetch(`${s.url}/api/chat/file?group=..&id=${ok}&seq=0`)).status).toBe(400);
    expect((await fetch(`${s.url}/api/chat/file?group=demo&id=-1&seq=0`)).status).toBe(400);
  });

  it('answers at once with a reason when a served file was swapped for a FIFO or its folder for a link', async () => {
    const s = await startWebServer();
    const demo = join(s.groupsDir, 'demo');
    const outsideDir = tempDir('gated-outside-');
    writeFileSync(join(outsideDir, 'r.txt'), 'secret');
    mkdirSync(join(demo, 'out'), { recursive: true });
    writeFileSync(join(demo, 'out', 'p.txt'), 'fine');
    writeFileSync(join(demo, 'out', 'r.txt'), 'fine');
    const fifo = replyWithFiles(s, null, [{ path: 'out/p.txt', abs: join(demo, 'out', 'p.txt') }]);
    const moved = replyWithFiles(s, null, [{ path: 'out/r.txt', abs: join(demo, 'out', 'r.txt') }]);
    // After the reply was listed, the agent swaps the file for a FIFO (which an open would wait on forever)
    // and then its whole out/ folder for a link to a folder outside.
    rmSync(join(demo, 'out', 'p.txt'));
    execFileSync('mkfifo', [join(demo, 'out', 'p.txt')]);
    const res = await fetch(`${s.url}/api/chat/file?group=demo&id=${fifo}&seq=0`, {
      signal: AbortSignal.timeout(5000),
    });
    expect([res.status, await res.json()]).toEqual([403, { error: 'file refused: not a regular file' }]);
    renameSync(join(demo, 'out'), join(demo, 'old-out'));
    symlinkSync(outsideDir, join(demo, 'out'));
    const viaDir = await fetch(`${s.url}/api/chat/file?group=demo&id=${moved}&seq=0`);
    expect([viaDir.status, await viaDir.json()]).toEqual([403, { error: 'file refused: symlink' }]);
  });
});

describe('web chat history bounds and drafts', () => {
  it('cuts a huge row in history and replay, keeping it whole in the database', async () => {
    const s = await startWebServer();
    const huge = 'x'.repeat(CHAT_LINE_MAX + 5000);
    s.db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:demo', 'u', ?)`).run(huge);
    const h = await getJson(`${s.url}/api/chat/history?group=demo`);
    const [line] = h.body.lines as ChatLine[];
    expect(line!.content.length).toBe(CHAT_LINE_MAX);
    expect(line!.full_length).toBe(huge.length);
    const replay = await SseClient.open(`${s.url}/api/chat/stream?group=demo&after=0`);
    const [ev] = await replay.waitFor('message', 1);
    expect((JSON.parse(ev!.data) as ChatLine).content.length).toBe(CHAT_LINE_MAX);
    replay.close();
    expect(s.db.prepare(`SELECT length(content) FROM messages`).pluck().get()).toBe(huge.length);
  });

  it('pushes a draft to its topic as it grows; a tab that connects mid-turn starts from it; removal ends it', async () => {
    const s = await startWebServer();
    const tab = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=support`);
    const other = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await tab.waitFor('ready', 1);
    await other.waitFor('ready', 1);
    const id = await s.web.drafts.open('web:demo', 'thinking', 'support');
    await s.web.drafts.edit('web:demo', id, 'thinking harder', false);
    const drafts = await tab.waitFor('draft', 2);
    expect(drafts.map((e) => JSON.parse(e.data))).toEqual([
      { id, text: 'thinking' },
      { id, text: 'thinking harder' },
    ]);
    const late = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=support&after=0`);
    const [first] = await late.waitFor('draft', 1);
    expect(JSON.parse(first!.data)).toEqual({ id, text: 'thinking harder' });
    await s.web.drafts.remove('web:demo', id);
    const gone = await tab.waitFor('draft', 3);
    expect(JSON.parse(gone[2]!.data)).toEqual({ id, text: null });
    expect(s.web.currentDraft('web:demo', 'support')).toBeUndefined();
    // The main topic's tab saw none of it.
    expect(other.events.filter((e) => e.event === 'draft')).toEqual([]);
    for (const c of [tab, other, late]) c.close();
  });
});
