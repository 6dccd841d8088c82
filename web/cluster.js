// The overview's cluster panel: where agents ran (one row per runtime and node: the swarm node id that
// ran each task), how long their start took (service create → task running, which includes waiting for a
// node with capacity), and how many lanes wait for a slot under the global cap.
import { age, el, table } from './common.js';
import { api, registerPanel } from './dash-core.js';

const seconds = (s) => age(Math.round(s * 1000));

registerPanel({
  id: 'cluster',
  title: 'Agents by node',
  hint: 'swarm tasks since gated started',
  async refresh(body) {
    const c = await api('cluster');
    // Nodes are a swarm's: under the process or docker runtime the panel has nothing to say.
    const section = body.closest('section');
    if (section) section.hidden = c.runtime !== undefined && c.runtime !== 'swarm' && c.nodes.length === 0;
    const lanes = el(
      'p',
      c.lanesWaiting > 0 ? 'bad' : '',
      `${c.lanesActive} with an agent (running or idle), ${c.lanesWaiting} waiting for a slot`,
    );
    const nodes = el('div');
    table(
      nodes,
      [
        ['runtime', (n) => n.runtime],
        ['node', (n) => n.node],
        ['agents started', (n) => n.started],
        ['start, mean', (n) => seconds(n.meanStartSeconds)],
        ['start, max', (n) => seconds(n.maxStartSeconds)],
        ['last start', (n) => new Date(n.lastStartMs).toLocaleTimeString()],
      ],
      c.nodes,
      'no swarm task started yet (the process and docker runtimes run agents on one host)',
    );
    body.replaceChildren(lanes, nodes);
  },
});
