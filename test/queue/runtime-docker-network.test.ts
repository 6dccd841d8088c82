/**
 * A group's docker network (registered_groups.network): its containers join the network it names, on a
 * real dockerd. That engine runs in a network namespace of its own, so the user-defined bridge made here
 * never touches the host's interfaces.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { runSpecOf } from '../../queue/agent-setup.js';
import { createDockerRuntime, INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { addGroup, setNetwork } from '../../store/groups.js';
import { QueueStore } from '../../store/queue.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';

const IMAGE = 'gated-network-agent:test';
const INSTANCE = `net-test-${process.pid}`;
const NETWORK = 'gated-test-net';

let engine: TestDockerd | undefined;

beforeAll(async () => {
  engine = await startDockerd(60_000, { ownNetwork: true });
  await engine.docker.createNetwork({ Name: NETWORK, Driver: 'bridge', Internal: true });
  await engine.buildAgentImage(IMAGE, packageFile('test', 'queue', 'agents'), 'conformance-agent.mjs');
}, 180_000);

afterAll(async () => {
  await engine?.stop();
});

it("starts a group's containers on the network it names, and others on none", async () => {
  const { db } = freshDb();
  const groups = tempDir('gated-net-groups-');
  addGroup(db, groups, 'net');
  addGroup(db, groups, 'quiet');
  expect(setNetwork(db, 'net', NETWORK)).toBe(true);
  const store = new QueueStore(db);
  const rt = createDockerRuntime({
    docker: engine!.docker,
    image: IMAGE,
    instanceId: INSTANCE,
    groupsDir: groups,
  });

  const networksOf = async (group: string, runId: number) => {
    const spec = runSpecOf(groups, { group, topic: '' }, runId, store.group(group), undefined);
    const handle = await rt.start(spec);
    try {
      const [info] = await engine!.docker.listContainers({ filters: { label: [`gated.run=${runId}`] } });
      const inspected = await engine!.docker.getContainer(info!.Id).inspect();
      return {
        mode: inspected.HostConfig.NetworkMode,
        joined: Object.keys(inspected.NetworkSettings.Networks),
      };
    } finally {
      handle.kill();
      await handle.exited;
    }
  };

  expect(await networksOf('net', 1)).toEqual({ mode: NETWORK, joined: [NETWORK] });
  expect(await networksOf('quiet', 2)).toEqual({ mode: 'none', joined: ['none'] });
  expect(
    await engine!.docker.listContainers({ all: true, filters: { label: [`${INSTANCE_LABEL}=${INSTANCE}`] } }),
  ).toEqual([]);
}, 60_000);

it('reads the old switch as bridge and refuses a value that is no network name', () => {
  const { db } = freshDb();
  const groups = tempDir('gated-net-groups-');
  addGroup(db, groups, 'old');
  const store = new QueueStore(db);
  const specOf = () => runSpecOf(groups, { group: 'old', topic: '' }, 1, store.group('old'), undefined);
  expect(specOf().network).toBeNull();
  // A script written for the old integer column still means what it meant.
  db.prepare(`UPDATE registered_groups SET network = 1`).run();
  expect(specOf().network).toBe('bridge');
  db.prepare(`UPDATE registered_groups SET network = 'container:other'`).run();
  expect(specOf).toThrow(
    'group \'old\': registered_groups.network "container:other" is not a docker network name',
  );
});
