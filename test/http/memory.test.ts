/**
 * The dashboard's memory page (docs/MEMORY.md) on a real SQLite file: a group's facts listed and searched
 * with their provenance, deleted only with the admin token and audited as `dashboard`.
 */
import { expect, it } from 'vitest';
import { MemoryStore } from '../../store/memory.js';
import { getJson, postJson, startWebServer } from './harness.js';

const TOKEN = 'memory-admin-token';

it('lists, searches and deletes a group’s facts; deleting needs the admin token and is audited', async () => {
  const s = await startWebServer({ adminToken: TOKEN, groups: ['ops', 'other'] });
  const store = new MemoryStore(s.db);
  const by = { run: 7, turn: 2, chat: 'web:ops', senders: [{ sender: 'web:ada', role: 'owner' }] };
  const key = store.remember({
    group: 'ops',
    scope: 'group',
    text: 'the deploy key is in the vault',
    provenance: by,
    actor: 'agent:ops',
  }).id;
  store.remember({
    group: 'ops',
    scope: 'web:bob',
    text: 'bob likes tea',
    provenance: { by: 'cli:root' },
    actor: 'cli:root',
  });
  store.remember({
    group: 'other',
    scope: 'group',
    text: 'the deploy key of another group',
    provenance: {},
    actor: 'x',
  });

  const all = await getJson(`${s.url}/api/memory?group=ops`);
  expect(all.status).toBe(200);
  expect(all.body.groups).toEqual(['ops', 'other']);
  expect((all.body.facts as { text: string; id: number }[]).map((f: { text: string }) => f.text)).toEqual([
    'the deploy key is in the vault',
    'bob likes tea',
  ]);
  expect((all.body.facts as unknown[])[0]).toMatchObject({
    id: key,
    scope: 'group',
    actor: 'agent:ops',
    provenance: by,
  });
  const found = await getJson(
    `${s.url}/api/memory?group=ops&q=${encodeURIComponent('where is the deploy key')}`,
  );
  expect((found.body.facts as { id: number }[]).map((f: { id: number }) => f.id)).toEqual([key]);
  expect((await getJson(`${s.url}/api/memory?group=nowhere`)).status).toBe(404);

  expect((await postJson(`${s.url}/api/memory/${key}/delete`, {})).status).toBe(401);
  const bearer = { Authorization: `Bearer ${TOKEN}` };
  expect(await postJson(`${s.url}/api/memory/${key}/delete`, {}, bearer)).toMatchObject({
    status: 200,
    body: { deleted: key },
  });
  expect((await postJson(`${s.url}/api/memory/${key}/delete`, {}, bearer)).status).toBe(404);
  expect(store.get(key)).toBeUndefined();
  const audit = s.db
    .prepare(`SELECT actor FROM audit WHERE subject = 'memories' AND action = 'delete' AND row_key = ?`)
    .pluck()
    .all(String(key));
  expect(audit).toEqual(['dashboard']);

  const page = await fetch(`${s.url}/dashboard/memory`);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('/assets/memory.js');
  expect((await fetch(`${s.url}/assets/memory.js`)).status).toBe(200);
});
