import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createProcessRuntime, pidNamespacePrefix } from '../../queue/runtime/process.js';
import { tempDir } from '../helpers/db.js';
import { sleepers, until } from '../helpers/process.js';

// Through the spawner (which sweeps at the run's end) and from gated itself (which sweeps off its loop).
for (const spawner of [true, false]) {
  describe(`process runtime${spawner ? '' : ', spawned by gated itself'}: everything an agent starts dies with its run`, () => {
    it('without a PID namespace, sweeps a child that left the process group with setsid', async () => {
      const n = String(3000 + Math.floor(Math.random() * 999_000));
      const runtime = createProcessRuntime({
        spawner,
        // In a namespace the kernel ends it (the cases below); without one the sweep is the only net.
        pidNamespace: false,
        // The agent starts a detached child in a new session, waits until it runs, then exits.
        cmd: `setsid sleep ${n} </dev/null >/dev/null 2>&1 & while ! pgrep -f "^sleep ${n}$" >/dev/null; do :; done; exit 0`,
      });
      const handle = await runtime.start({ runId: 1, group: 'g', topic: '', groupDir: join(tempDir(), 'g') });
      const exit = await handle.exited;
      expect(exit.code).toBe(0);
      // Without the sweep the setsid child outlived the run (it is in no group the runtime kills).
      await until(() => sleepers(n).length === 0, 5000, `sleep ${n} to be gone`);
      expect(sleepers(n)).toEqual([]);
    });

    // A child that clears its environment (no run mark) and leaves the session and group is out of reach of
    // the sweep and of the group kill: only the run's PID namespace ends it.
    const escapee = (n: string) =>
      `env -i setsid sleep ${n} </dev/null >/dev/null 2>&1 & while ! pgrep -f "^sleep ${n}$" >/dev/null; do :; done`;

    /** Kills what a failing case left behind (only processes whose command line is `sleep <n>`). */
    const reap = (n: string) => {
      for (const pid of sleepers(n)) process.kill(pid, 'SIGKILL');
    };

    it('an `env -i setsid` child does not survive the run that started it', async () => {
      expect(await pidNamespacePrefix()).not.toEqual([]);
      const n = String(3000 + Math.floor(Math.random() * 999_000));
      try {
        const runtime = createProcessRuntime({ cmd: `${escapee(n)}; exit 0`, spawner });
        const handle = await runtime.start({
          runId: 2,
          group: 'g',
          topic: '',
          groupDir: join(tempDir(), 'g'),
        });
        expect((await handle.exited).code).toBe(0);
        await until(() => sleepers(n).length === 0, 5000, `sleep ${n} to be gone`);
      } finally {
        reap(n);
      }
    });

    it('nor one of a run that is killed', async () => {
      const n = String(3000 + Math.floor(Math.random() * 999_000));
      try {
        const runtime = createProcessRuntime({ cmd: `${escapee(n)}; echo up; exec sleep 600`, spawner });
        const handle = await runtime.start({
          runId: 3,
          group: 'g',
          topic: '',
          groupDir: join(tempDir(), 'g'),
        });
        await new Promise<void>((resolve) => handle.stdout.once('data', () => resolve()));
        expect(sleepers(n)).toHaveLength(1);
        handle.kill();
        expect((await handle.exited).signal).toBe('SIGKILL');
        await until(() => sleepers(n).length === 0, 5000, `sleep ${n} to be gone`);
      } finally {
        reap(n);
      }
    });

    it('without a PID namespace, that child escapes (why the namespace is there)', async () => {
      const n = String(3000 + Math.floor(Math.random() * 999_000));
      const runtime = createProcessRuntime({ cmd: `${escapee(n)}; exit 0`, pidNamespace: false, spawner });
      const handle = await runtime.start({ runId: 4, group: 'g', topic: '', groupDir: join(tempDir(), 'g') });
      expect((await handle.exited).code).toBe(0);
      await new Promise((r) => setTimeout(r, 500));
      try {
        expect(sleepers(n)).toHaveLength(1);
      } finally {
        reap(n);
      }
    });
  });
}
