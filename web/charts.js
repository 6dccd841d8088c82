// The history charts: per-minute series from /api/dashboard/history drawn with uPlot (served from the
// installed package, never a CDN), one chart per figure, redrawn live every few seconds. Each chart's head
// shows the range's total (counts), worst value (percentiles) or latest sample (queue depth), so a number
// can be read without hovering.
import uPlot from '/assets/vendor/uplot.js';
import { el } from './common.js';
import { api, readError } from './dash-core.js';

const REFRESH_MS = 10_000;
const COLOURS = ['#2f6feb', '#e8590c', '#2e7d32', '#c62828', '#7b1fa2', '#00838f', '#f9a825', '#5d4037'];
const FIXED_COLOURS = { ok: '#2e7d32', error: '#c62828', timeout: '#f9a825', stopped: '#7b1fa2' };

/** Which figure each chart shows; `pick` maps a stored label to the line it belongs to. */
const CHARTS = [
  { id: 'in-platform', title: 'Messages in, by platform', series: 'in', pick: (l) => l.split('/')[0] },
  { id: 'in-outcome', title: 'Messages in, by outcome', series: 'in', pick: (l) => l.split('/')[1] || l },
  { id: 'out', title: 'Replies out, by platform', series: 'out' },
  { id: 'runs', title: 'Runs, by result', series: 'runs' },
  {
    id: 'work-ms',
    title: 'Run time worked (ms)',
    hint: 'per run: agent start → its last answer, without the waits for follow-ups between turns.',
    series: 'work_ms',
    kind: 'percentile',
  },
  {
    id: 'idle-ms',
    title: 'Run time idle (ms)',
    hint: 'per run: after answering, the agent stays up for a follow-up until GATED_IDLE_TIMEOUT_MS, then exits. Not time anyone waited.',
    series: 'idle_ms',
    kind: 'percentile',
  },
  { id: 'latency', title: 'Message → reply latency (ms)', series: 'latency_ms', kind: 'percentile' },
  { id: 'queue', title: 'Queue depth (rows)', series: 'queue', kind: 'gauge' },
  { id: 'delivery', title: 'Delivery failures', series: 'delivery' },
  { id: 'cost', title: 'Agent cost (USD)', series: 'cost', pick: () => 'cost' },
];

const charts = new Map();
let range = 'hour';
let timer;

/** Lines of one chart: label → values, labels merged by `pick`. */
function linesOf(def, data) {
  const stored = data.series[def.series] || {};
  const out = new Map();
  for (const [label, values] of Object.entries(stored)) {
    const name = def.pick ? def.pick(label) : label;
    const acc = out.get(name);
    if (!acc) out.set(name, values.slice());
    else values.forEach((v, i) => (acc[i] = v === null ? acc[i] : (acc[i] ?? 0) + v));
  }
  return [...out.entries()].sort(([a], [b]) => a.localeCompare(b));
}

/** The head figure of a chart, as text, and as a number for tests to compare. */
function headline(def, lines) {
  if (lines.length === 0) return { text: 'none', value: 0 };
  if (def.kind === 'percentile') {
    const worst = Math.max(0, ...lines.flatMap(([, v]) => v.filter((x) => x !== null)));
    return { text: `worst ${Math.round(worst).toLocaleString('en')} ms`, value: worst };
  }
  if (def.kind === 'gauge') {
    const latest = lines.map(([name, v]) => `${name} ${[...v].reverse().find((x) => x !== null) ?? 0}`);
    return { text: `now: ${latest.join(', ')}`, value: null };
  }
  const total = lines.reduce((n, [, v]) => n + v.reduce((a, x) => a + (x || 0), 0), 0);
  const rounded = def.series === 'cost' ? Math.round(total * 100) / 100 : total;
  return { text: `total ${rounded.toLocaleString('en')}`, value: rounded };
}

function draw(def, data, box) {
  const lines = linesOf(def, data);
  const head = headline(def, lines);
  const total = box.querySelector('.total');
  total.textContent = head.text;
  if (head.value !== null) total.dataset.value = String(head.value);
  const xs = data.minutes.map((m) => m * 60);
  const plotData = [xs, ...lines.map(([, v]) => v)];
  const names = lines.map(([n]) => n).join('|');
  const old = charts.get(def.id);
  const width = Math.max(280, box.clientWidth - 16);
  if (old && old.names === names) return updatePlot(old.plot, plotData, width);
  old?.plot.destroy();
  const plotBox = box.querySelector('.plot');
  plotBox.replaceChildren();
  if (lines.length === 0) {
    plotBox.append(el('p', 'empty', 'nothing in this range'));
    charts.delete(def.id);
    return;
  }
  const plot = linePlot(
    plotBox,
    plotData,
    lines.map(([name]) => name),
    {
      width,
      // Percentiles and samples exist only for minutes with data: dots show a lone minute too.
      sparse: def.kind === 'percentile' || def.kind === 'gauge',
    },
  );
  charts.set(def.id, { plot, names });
}

/**
 * A time chart of `names` (one line each) over `data` ([seconds, ...values]) in `box`, 170 px high, the
 * dashboard's colours, and the legend showing each line's latest value away from the cursor. `sparse`
 * spans gaps (figures that exist only where there was data); `dots` marks every point (sparse or few).
 */
export function linePlot(box, data, names, { width, sparse = false, dots = sparse }) {
  const plot = new uPlot(
    {
      width,
      height: 170,
      scales: { x: { time: true } },
      axes: [{}, { size: 60 }],
      // Away from the cursor, the legend shows each series' latest value instead of "--".
      hooks: { setLegend: [(u) => u.legend.idx == null && showLatest(u)] },
      series: [
        {},
        ...names.map((name, i) => ({
          label: name,
          stroke: FIXED_COLOURS[name] || COLOURS[i % COLOURS.length],
          width: 2,
          points: { show: dots, size: 5 },
          spanGaps: sparse,
        })),
      ],
    },
    data,
    box,
  );
  showLatest(plot);
  return plot;
}

/** New data for a chart whose lines are the same, resized when its box was. */
export function updatePlot(plot, data, width) {
  plot.setData(data);
  showLatest(plot);
  if (Math.abs(plot.width - width) > 4) plot.setSize({ width, height: 170 });
}

/** Sets the legend to each series' latest point that has a value (uPlot's legend shows "--" otherwise). */
export function showLatest(u) {
  const xs = u.data[0];
  if (!xs || xs.length === 0) return;
  const idxs = u.data.map((ys, i) => {
    if (i === 0) return xs.length - 1;
    for (let k = ys.length - 1; k >= 0; k -= 1) if (ys[k] !== null && ys[k] !== undefined) return k;
    return null;
  });
  u.setLegend({ idxs }, false);
}

/** Fetches the range and redraws every chart. */
export async function refreshCharts() {
  const status = document.getElementById('charts-state');
  try {
    const data = await api(`history?range=${range}`);
    if (data.off) {
      status.textContent = 'the history is off (GATED_HISTORY_DAYS=0)';
      return;
    }
    for (const def of CHARTS) draw(def, data, document.getElementById(`chart-${def.id}`));
    const kept = document.getElementById('history-kept');
    if (kept && data.keptDays) kept.textContent = `per minute, kept for ${data.keptDays} days`;
    status.textContent = `per ${data.step === 1 ? 'minute' : `${data.step} minutes`}, live`;
  } catch (err) {
    status.textContent = `charts: ${readError(err)}`;
  }
}

/** Builds the chart boxes and the range buttons into `container`, and starts the live refresh. */
export function mountCharts(container) {
  const buttons = el('div', 'ranges');
  for (const r of ['hour', 'day', 'week']) {
    const b = el('button', r === range ? 'range on' : 'range', `last ${r}`, { type: 'button' });
    b.dataset.range = r;
    b.addEventListener('click', () => {
      range = r;
      for (const x of buttons.children) x.classList.toggle('on', x.dataset.range === r);
      void refreshCharts();
    });
    buttons.append(b);
  }
  buttons.append(el('span', 'muted', '', { id: 'charts-state' }));
  const grid = el('div', 'charts');
  for (const def of CHARTS) {
    const box = el('figure', 'chart', undefined, { id: `chart-${def.id}` });
    box.dataset.series = def.series;
    const cap = el('figcaption');
    cap.append(el('span', 'title', def.title), el('span', 'total', '…'));
    box.append(cap);
    if (def.hint) box.append(el('p', 'hint', def.hint));
    box.append(el('div', 'plot'));
    grid.append(box);
  }
  container.replaceChildren(buttons, grid);
  void refreshCharts();
  window.clearInterval(timer);
  timer = window.setInterval(() => void refreshCharts(), REFRESH_MS);
  window.addEventListener('resize', () => void refreshCharts());
}
