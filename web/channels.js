// The overview's channels panel: each platform channel that started, whether it reached its platform yet
// (a channel that could not at start keeps trying in the background), and what it can do there: its
// platform's row in core/platforms.ts, every platform alike (http/dashboard.ts channelFacts).
import { el, table } from './common.js';
import { api, registerPanel } from './dash-core.js';

const yes = (b) => (b ? 'yes' : '—');

function state(c) {
  if (c.connected === null) return el('span', '', 'in process');
  return c.connected ? el('span', '', 'connected') : el('span', 'bad', 'connecting…');
}

registerPanel({
  id: 'channels',
  title: 'Channels',
  hint: 'the platforms this gated started, and what each can do',
  // Nine columns: half the overview's width would cut them off.
  wide: true,
  async refresh(body) {
    const { channels } = await api('channels');
    const list = el('div');
    table(
      list,
      [
        ['platform', (c) => c.platform],
        ['state', state],
        ['webhook', (c) => (c.webhook ? `/hooks/${c.platform}` : '—')],
        ['drafts', (c) => yes(c.drafts)],
        ['typing', (c) => yes(c.typing)],
        ['buttons', (c) => yes(c.buttons)],
        ['files', (c) => yes(c.files)],
        ['reactions', (c) => yes(c.reactions)],
        ['part limit', (c) => `${c.limit} ${c.unit}`],
      ],
      channels,
      'no channel started',
    );
    body.replaceChildren(list);
  },
});
