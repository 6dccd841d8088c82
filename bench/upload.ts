import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import pino from 'pino';
import { WebChannel } from '../channels/web/index.js';
import { createMetrics } from '../core/metrics.js';
import { ClientBounds, DEFAULT_CLIENT_CAPS } from '../http/bounds.js';
import { createHttpApp, emptyStatus, startHttpServer } from '../http/app.js';
import { openDatabase } from '../store/db.js';
import { insertInbound } from '../store/messages.js';
import { monitorLoopDelay } from './loop-delay.js';

/** One way of reading a multipart upload of `mib` MiB, and how long it held the event loop at most. */
export interface UploadRow {
  scenario: 'upload';
  how: string;
  mib: number;
  /** The event loop's longest stall while the upload was read (ms; target ≤ 50). */
  stallMaxMs: number;
  stallP99Ms: number;
  wallMs: number;
  status: number;
}

const BOUNDARY = '----gated-bench-upload';

/** A multipart body as a browser sends it: the chat post's fields and one file of `bytes`. */
function multipart(bytes: number): Buffer {
  const head =
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="group"\r\n\r\ndemo\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="content"\r\n\r\na big file\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
    `Content-Type: application/octet-stream\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), randomBytes(bytes), Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]);
}

/** POSTs `body` in 64 KiB writes, as a socket would carry it; resolves with the status. */
function post(url: string, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/api/chat/upload`,
      {
        method: 'POST',
        headers: {
          'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
          'content-length': String(body.length),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    let at = 0;
    const more = () => {
      while (at < body.length) {
        const ok = req.write(body.subarray(at, (at += 65_536)));
        if (!ok) return void req.once('drain', more);
      }
      req.end();
    };
    more();
  });
}

/**
 * The web chat's upload handler, served as gated serves it, taking one `mib` MiB upload (the client in
 * this process writes prebuilt bytes, so what the loop does is the server's), beside the whole-body parse
 * it replaced (hono's parseBody, which runs Request.formData over the streamed body) on the same bytes.
 */
export async function uploadBench(mib = 20): Promise<UploadRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-upload-'));
  const db = openDatabase(join(dir, 'gated.db'));
  db.prepare(`INSERT INTO registered_groups (folder, name) VALUES ('demo', 'demo')`).run();
  const web = new WebChannel(db, { uploadsDir: join(dir, 'uploads') });
  await web.start((m) => insertInbound(db, m));
  const app = createHttpApp({
    db,
    config: {
      adminToken: undefined,
      groupsDir: join(dir, 'groups'),
      maxAttachmentBytes: (mib + 1) * 2 ** 20,
    },
    bounds: new ClientBounds({ ...DEFAULT_CLIENT_CAPS, uploadBytesPerHour: 2 ** 40 }),
    log: pino({ level: 'silent' }),
    metrics: createMetrics(),
    web,
    sink: (m) => insertInbound(db, m),
    status: () => emptyStatus(),
    pingRuntime: undefined,
  });
  const server = await startHttpServer(app, { host: '127.0.0.1', port: 0 });
  const body = multipart(mib * 2 ** 20);
  const rows: UploadRow[] = [];
  const measure = async (how: string, run: () => Promise<number>) => {
    const delay = monitorLoopDelay(1);
    const t0 = performance.now();
    const status = await run();
    const wallMs = performance.now() - t0;
    delay.stop();
    rows.push({
      scenario: 'upload',
      how,
      mib,
      stallMaxMs: round1(delay.max()),
      stallP99Ms: round1(delay.percentile(99)),
      wallMs: Math.round(wallMs),
      status,
    });
  };
  try {
    // One of each first: the code is compiled and the disk warm before the clock starts.
    await post(server.url, body);
    // What the loop shows doing nothing for as long: the machine's own noise under the figures.
    await measure('nothing for 300 ms (the noise floor)', async () => {
      await new Promise((r) => setTimeout(r, 300));
      return 0;
    });
    await measure('streamed (the handler now)', () => post(server.url, body));
    // The handler before: hono's parseBody (Request.formData over the streamed body), then the file whole.
    const before = await startHttpServer(
      new Hono().post('/api/chat/upload', async (c) => {
        const form = await c.req.parseBody({ all: true });
        const file = form.file as File;
        await web.uploads.put(new Uint8Array(await file.arrayBuffer()));
        return c.text('stored', 201);
      }),
      { host: '127.0.0.1', port: 0 },
    );
    try {
      await post(before.url, body);
      await measure('parseBody, whole body in memory (the handler before)', () => post(before.url, body));
    } finally {
      await before.close();
    }
  } finally {
    await web.stop();
    await server.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
