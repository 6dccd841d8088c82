import { describe, expect, it } from 'vitest';
import { addTask, getTask } from '../../store/tasks.js';
import { getJson, postJson, startWebServer } from './harness.js';

const TOKEN = 'tasks-admin-token';

describe('tasks on the dashboard', () => {
  it('lists tasks with next and last run; pause and resume need the admin token', async () => {
    const s = await startWebServer({ adminToken: TOKEN, groups: ['ops'] });
    const now = Date.now();
    const id = addTask(
      s.db,
      { group: 'ops', topic: 'daily', chat_jid: 'web:ops', kind: 'every', spec: '1h', text: 'report' },
      now,
      'UTC',
    );
    s.db.prepare(`UPDATE tasks SET last_run_at = '2026-11-23T09:00:00.000Z' WHERE id = ?`).run(id);

    const list = await getJson(`${s.url}/api/tasks`);
    expect(list.status).toBe(200);
    expect(list.body.tasks).toEqual([
      expect.objectContaining({
        id,
        status: 'active',
        group_folder: 'ops',
        topic: 'daily',
        kind: 'every',
        spec: '1h',
        next_run_at: new Date(now + 3_600_000).toISOString(),
        last_run_at: '2026-11-23T09:00:00.000Z',
      }),
    ]);

    expect((await postJson(`${s.url}/api/tasks/${id}/pause`, {})).status).toBe(401);
    expect(getTask(s.db, id)!.status).toBe('active');
    const bearer = { Authorization: `Bearer ${TOKEN}` };
    const paused = await postJson(`${s.url}/api/tasks/${id}/pause`, {}, bearer);
    expect(paused).toMatchObject({ status: 200, body: { task: { id, status: 'paused' } } });
    expect(await postJson(`${s.url}/api/tasks/${id}/pause`, {}, bearer)).toMatchObject({
      status: 409,
      body: { error: `task ${id} is not active` },
    });
    const resumed = await postJson(`${s.url}/api/tasks/${id}/resume`, {}, bearer);
    expect(resumed).toMatchObject({ status: 200, body: { task: { status: 'active', failures: 0 } } });
    expect((await postJson(`${s.url}/api/tasks/999/resume`, {}, bearer)).status).toBe(404);

    const page = await fetch(`${s.url}/dashboard/tasks`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('/assets/tasks.js');
    expect((await fetch(`${s.url}/assets/tasks.js`)).status).toBe(200);
  });

  it('refuses edits when no admin token is configured', async () => {
    const s = await startWebServer({ groups: ['ops'] });
    const id = addTask(
      s.db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'every', spec: '1h', text: 'x' },
      Date.now(),
      'UTC',
    );
    expect((await postJson(`${s.url}/api/tasks/${id}/pause`, {})).status).toBe(403);
    expect(getTask(s.db, id)!.status).toBe('active');
  });
});
