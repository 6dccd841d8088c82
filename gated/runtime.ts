import type { Config } from '../core/config.js';
import { UsageError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Db } from '../store/db.js';
import { placementReader } from '../store/groups.js';
import { createProcessRuntime } from '../queue/runtime/process.js';
import type { Runtime } from '../queue/runtime/types.js';
import { instanceId } from '../store/owner.js';

/**
 * Makes the runtime the configuration names (dockerode is loaded only for the container runtimes). A
 * container engine is checked at start: wrong certificates or a missing image stop the start with one line;
 * an engine that is only unreachable is logged, and runs are retried until it answers.
 */
export async function makeRuntime(config: Config, db: Db, log: Logger, metrics: Metrics): Promise<Runtime> {
  if (config.runtime === 'process')
    return createProcessRuntime({
      cmd: config.agentCmd,
      log: log.child({ part: 'process' }),
      ...(config.processUser !== undefined ? { user: config.processUser } : {}),
      groupsDir: config.groupsDir,
    });
  const { default: Docker } = await import('dockerode');
  const { engineOptions, describeAddress, EngineError, nodeEngines } =
    await import('../queue/runtime/engine.js');
  const address = {
    host: config.dockerHost,
    tlsVerify: config.dockerTlsVerify,
    certPath: config.dockerCertPath,
  };
  const docker = new Docker(engineOptions(address));
  const where = describeAddress(address);
  const common = {
    docker,
    image: config.agentImage,
    instanceId: instanceId(db),
    groupsDir: config.groupsDir,
    mountAllow: config.mountAllow,
  };
  let runtime: Runtime;
  if (config.runtime === 'swarm') {
    const { createSwarmRuntime } = await import('../queue/runtime/swarm.js');
    const slog = log.child({ part: 'swarm' });
    const placement = placementReader(db, slog);
    runtime = createSwarmRuntime({
      ...common,
      where,
      placement,
      nodeEngine: nodeEngines(docker, Docker, address, config.swarmNodePort),
      spares: config.swarmSpares,
      log: slog,
      metrics,
    });
  } else {
    const { createDockerRuntime } = await import('../queue/runtime/docker.js');
    runtime = createDockerRuntime({ ...common, where, log: log.child({ part: 'docker' }) });
  }
  try {
    await runtime.ping();
  } catch (err) {
    if (err instanceof EngineError && err.problem !== 'unreachable') throw new UsageError(err.message);
    log.warn({ engine: where, err: (err as Error).message }, 'the engine is not answering; runs wait for it');
  }
  return runtime;
}
