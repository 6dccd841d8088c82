/**
 * Who the gateway wakes for one message (docs/ARCHITECTURE.md, "Stages and who wakes whom"): the inbox
 * only when a routed message waits for its files, the workflow engine only when a `/workflow` started a
 * run or, while a run is running, when an answer or a decision was written.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createSignals } from '../../core/signals.js';
import { WorkflowEngine } from '../../gateway/workflows.js';
import { insertInbound } from '../../store/messages.js';
import { WorkflowStore } from '../../store/workflows.js';
import { freshDb } from '../helpers/db.js';
import { testGateway } from '../helpers/gateway.js';
import { until } from '../helpers/process.js';

describe('the wakes of one batch', () => {
  it('fires `files` for a routed message with files, never for one without', async () => {
    const { db } = freshDb();
    const { gateway, signals } = testGateway(db, { groups: ['demo'] });
    let files = 0;
    let queued = 0;
    signals.files.on(() => files++);
    signals.queued.on(() => queued++);
    try {
      insertInbound(db, { chat_jid: 'web:demo', sender: 'u', content: 'hello' });
      gateway.loop.tick();
      await until(() => queued === 1, 5000, 'the first release');
      expect(files).toBe(0);
      insertInbound(db, {
        chat_jid: 'web:demo',
        sender: 'u',
        content: 'a photo',
        attachments: [{ kind: 'photo', name: 'a.jpg', mime: 'image/jpeg', size: null, source: 'x' }],
      });
      gateway.loop.tick();
      await until(() => files === 1, 5000, 'the files wake');
    } finally {
      await gateway.stop();
    }
  });

  it('the workflow engine hears answers and decisions only while a run is running', async () => {
    const { db } = freshDb();
    const signals = createSignals();
    const engine = new WorkflowEngine({ db, log: silentLogger(), signals, intervalMs: 3_600_000 });
    const store = (engine as unknown as { store: WorkflowStore }).store;
    let looks = 0;
    const anyRunning = store.anyRunning.bind(store);
    // Each look of the engine begins with this query.
    store.anyRunning = () => {
      looks += 1;
      return anyRunning();
    };
    const listeners = () =>
      [signals.outbound, signals.decided].map(
        (s) => (s as unknown as { listeners: unknown[] }).listeners.length,
      );
    engine.start();
    try {
      await until(() => looks === 1, 5000, 'the first look at start');
      expect(listeners()).toEqual([0, 0]); // a message's answer does not wake it
      new WorkflowStore(db).insertRun({
        group_folder: 'g',
        name: 'w',
        file: 'w.md',
        arguments: '',
        workflow: { name: 'w', steps: [] } as unknown as Parameters<
          WorkflowStore['insertRun']
        >[0]['workflow'],
        chat_jid: 'web:g',
        thread: '',
        started_by: 'u',
        now: Date.now(),
      });
      signals.workflows.fire();
      // That look ends the run of no steps and tells its chat (`outbound`): heard while the run was running,
      // it asks for a third look, which finds no run and stops hearing.
      await until(() => looks === 3, 5000, 'the look its own notice asks for');
      expect(new WorkflowStore(db).anyRunning()).toBe(false);
      expect(listeners()).toEqual([0, 0]);
    } finally {
      await engine.stop();
    }
  });
});
