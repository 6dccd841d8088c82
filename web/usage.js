// The overview's usage panel (docs/COSTS.md): cost and tokens per UTC day, by group and by person (the
// sender the usage reports were credited to), drawn with the history charts' uPlot setup, and the daily
// caps of the groups and their senders with what each used today. Read-only: the caps are edited with
// `gated access limit` (audited), as `gated usage` lists the same rows.
import { el, table, usd } from './common.js';
import { linePlot, updatePlot } from './charts.js';
import { api, registerPanel } from './dash-core.js';

const DAYS = 14;
/** Lines per chart; the rest are summed as one line "others". */
const MOST_LINES = 8;

const CHARTS = [
  { id: 'group-cost', title: 'Cost per day, by group (USD)', by: 'group', figure: 'cost' },
  { id: 'sender-cost', title: 'Cost per day, by person (USD)', by: 'sender', figure: 'cost' },
  { id: 'group-tokens', title: 'Tokens per day, by group', by: 'group', figure: 'tokens' },
  { id: 'sender-tokens', title: 'Tokens per day, by person', by: 'sender', figure: 'tokens' },
];

const plots = new Map();

const figureOf = (def, r) => (def.figure === 'cost' ? r.cost_usd : r.input_tokens + r.output_tokens);
const nameOf = (def, r) => (def.by === 'group' ? r.group_folder : r.sender || '(no sender)');
/** Costs summed in floating point, shown and compared to a millionth of a dollar. */
const round = (def, v) => (def.figure === 'cost' ? Math.round(v * 1e6) / 1e6 : v);

/** The chart's lines: name → one value per day, the biggest first, the rest as "others". */
function linesOf(def, data) {
  const index = new Map(data.days.map((d, i) => [d, i]));
  const by = new Map();
  for (const r of data.rows) {
    const name = nameOf(def, r);
    const values = by.get(name) ?? by.set(name, new Array(data.days.length).fill(0)).get(name);
    const i = index.get(r.day);
    if (i !== undefined) values[i] += figureOf(def, r);
  }
  const sum = (v) => v.reduce((a, x) => a + x, 0);
  const lines = [...by.entries()].sort(([a, x], [b, y]) => sum(y) - sum(x) || a.localeCompare(b));
  if (lines.length <= MOST_LINES) return lines;
  const others = new Array(data.days.length).fill(0);
  for (const [, v] of lines.slice(MOST_LINES - 1)) v.forEach((x, i) => (others[i] += x));
  return [...lines.slice(0, MOST_LINES - 1), ['others', others]];
}

function drawChart(def, data, box) {
  const lines = linesOf(def, data);
  const total = round(
    def,
    lines.reduce((n, [, v]) => n + v.reduce((a, x) => a + x, 0), 0),
  );
  const head = box.querySelector('.total');
  head.textContent = def.figure === 'cost' ? `total ${usd(total)}` : `total ${total.toLocaleString('en')}`;
  head.dataset.value = String(total);
  box.dataset.lines = lines.map(([n]) => n).join('|');
  // Noon of each UTC day, so a day's point sits inside its day in any time zone's axis.
  const xs = data.days.map((d) => Date.parse(`${d}T12:00:00Z`) / 1000);
  const plotData = [xs, ...lines.map(([, v]) => v.map((x) => round(def, x)))];
  const names = box.dataset.lines;
  const width = Math.max(280, box.clientWidth - 16);
  const old = plots.get(def.id);
  if (old && old.names === names && old.plot.root.isConnected) return updatePlot(old.plot, plotData, width);
  old?.plot.destroy();
  const plotBox = box.querySelector('.plot');
  plotBox.replaceChildren();
  plots.delete(def.id);
  if (lines.length === 0) {
    plotBox.append(el('p', 'empty', `no usage reported in the last ${data.days.length} days`));
    return;
  }
  plots.set(def.id, {
    plot: linePlot(
      plotBox,
      plotData,
      lines.map(([n]) => n),
      { width, dots: true },
    ),
    names,
  });
}

/** "2 of 20 runs, $0.04 of $0.50, 1,200 of 5,000 tokens": today's use of each cap the row sets. */
function todayText(l) {
  if (!l.today) return 'each sender without a row of their own';
  const parts = [];
  const n = (v) => v.toLocaleString('en');
  if (l.runs_per_day !== null) parts.push(`${l.today.runs} of ${l.runs_per_day} runs`);
  if (l.cost_per_day_usd !== null) parts.push(`${usd(l.today.cost)} of ${usd(l.cost_per_day_usd)}`);
  if (l.tokens_per_day !== null) parts.push(`${n(l.today.tokens)} of ${n(l.tokens_per_day)} tokens`);
  return parts.join(', ') || 'no daily cap';
}

/** The highest share of a cap used today, as a whole percent (null: nothing to compare). */
function worstShare(l) {
  if (!l.today) return null;
  const shares = [
    [l.today.runs, l.runs_per_day],
    [l.today.cost, l.cost_per_day_usd],
    [l.today.tokens, l.tokens_per_day],
  ]
    .filter(([, cap]) => cap !== null && cap > 0)
    .map(([used, cap]) => used / cap);
  return shares.length ? Math.round(Math.max(...shares) * 100) : null;
}

function mount(body) {
  const grid = el('div', 'charts usage-charts');
  for (const def of CHARTS) {
    const box = el('figure', 'chart', undefined, { id: `usage-${def.id}` });
    const cap = el('figcaption');
    cap.append(el('span', 'title', def.title), el('span', 'total', '…'));
    box.append(cap, el('div', 'plot'));
    grid.append(box);
  }
  const limits = el('div', 'usage-limits', undefined, { id: 'usage-limits' });
  const caption = el(
    'p',
    'muted',
    'Daily caps (UTC days), of the group and of its senders: set with gated access limit GROUP [--sender ID]',
  );
  const prices = el('div', 'usage-prices', undefined, { id: 'usage-prices' });
  const pricesCaption = el(
    'p',
    'muted',
    "What usage reported without a cost is priced by: gated prices set MODEL IN OUT ('*': any other model)",
  );
  body.replaceChildren(
    grid,
    el('h3', '', 'Daily caps and today'),
    caption,
    limits,
    el('h3', '', 'Prices per model'),
    pricesCaption,
    prices,
  );
}

registerPanel({
  id: 'usage',
  title: 'Usage per group, person and day',
  hint: `the last ${DAYS} UTC days, as the agents reported it (gated usage); prices: gated prices`,
  wide: true,
  async refresh(body) {
    if (!body.querySelector('.usage-charts')) mount(body);
    const data = await api(`usage?days=${DAYS}`);
    for (const def of CHARTS) drawChart(def, data, body.querySelector(`#usage-${def.id}`));
    const box = body.querySelector('#usage-limits');
    box.dataset.count = String(data.limits.length);
    table(
      box,
      [
        ['group', (l) => l.group],
        [
          'who',
          (l) => (l.sender === null ? '(the group)' : l.sender === '*' ? '* (everyone else)' : l.sender),
        ],
        ['runs/day', (l) => l.runs_per_day ?? '-'],
        ['cost/day', (l) => (l.cost_per_day_usd === null ? '-' : usd(l.cost_per_day_usd))],
        ['tokens/day', (l) => (l.tokens_per_day === null ? '-' : l.tokens_per_day.toLocaleString('en'))],
        ['today', (l) => todayText(l)],
        [
          'used',
          (l) => {
            const share = worstShare(l);
            return el(
              'span',
              share !== null && share >= 80 ? 'bad share' : 'share',
              share === null ? '' : `${share} %`,
            );
          },
        ],
      ],
      data.limits.map((l) => ({
        ...l,
        __id: `${l.group}/${l.sender ?? ''}`,
        __class: l.sender === null ? 'limit group-limit' : 'limit sender-limit',
      })),
      'no daily caps: gated access limit GROUP --cost-per-day 1 (or --sender ID …)',
    );
    table(
      body.querySelector('#usage-prices'),
      [
        ['model', (p) => p.model],
        ['input, USD per million tokens', (p) => p.input_per_mtok],
        ['output, USD per million tokens', (p) => p.output_per_mtok],
      ],
      data.prices.map((p) => ({ ...p, __id: p.model, __class: 'price' })),
      'no price rows: usage without a cost counts as $0',
    );
  },
});
