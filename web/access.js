// The access page of the dashboard (docs/ACCESS.md): pending pairing codes with approve / reject, groups
// with their mode, limits and usage, members, withheld messages and the audit trail. Like the dashboard,
// the admin token lives in this page's memory only and goes out as a Bearer header; without it the page
// is read-only. Every text from the server is set with textContent (see common.js).
import { adminPage, age, el, getJson, localTime, table } from './common.js';

const $ = (id) => document.getElementById(id);
function button(text, cls, onClick) {
  const b = el('button', cls, text, { type: 'button' });
  b.addEventListener('click', onClick);
  return b;
}

async function post(path, body) {
  return getJson(`/api/access/${path}`, {
    method: 'POST',
    headers: { ...auth(), 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function decide(code, approve) {
  try {
    const r = await post(approve ? 'approve' : 'reject', { code });
    notice(r.text);
  } catch (err) {
    notice(`not decided: ${err.message}`);
  }
  await refresh(false);
}

async function release(chat) {
  try {
    const r = await post('release', { chat_jid: chat });
    notice(`${r.released} message(s) of ${chat} released`);
  } catch (err) {
    notice(`not released: ${err.message}`);
  }
  await refresh(false);
}

function limitsText(l) {
  if (!l) return 'none';
  const parts = [];
  if (l.senderPerHour !== null) parts.push(`${l.senderPerHour} msgs/sender/h`);
  if (l.runsPerDay !== null) parts.push(`${l.runsPerDay} runs/day`);
  if (l.costPerDayUsd !== null) parts.push(`$${l.costPerDayUsd}/day`);
  if (l.tokensPerDay != null) parts.push(`${l.tokensPerDay} tokens/day`);
  return parts.join(', ') || 'none';
}

function render(r) {
  const codeCols = [
    ['code', (a) => el('span', 'code', a.code)],
    ['group', (a) => a.group_folder],
    ['sender', (a) => (a.sender_name ? `${a.sender} (${a.sender_name})` : a.sender)],
    ['chat', (a) => a.chat_jid],
    ['asked', (a) => `${age(r.now - a.created_at)} ago`],
    ['expires in', (a) => age(a.expires_at - r.now)],
  ];
  if (page.hasToken()) {
    codeCols.push([
      '',
      (a) => {
        const span = el('span', 'actions');
        span.append(
          button('approve', 'approve', () => void decide(a.code, true)),
          button('reject', 'danger reject', () => void decide(a.code, false)),
        );
        return span;
      },
    ]);
  }
  table(
    $('approvals'),
    codeCols,
    r.open.map((a) => ({ ...a, __id: a.code, __class: 'approval' })),
    'no open pairing codes',
  );
  table(
    $('access-groups'),
    [
      ['group', (g) => g.folder],
      ['mode', (g) => el('span', `mode ${g.mode}`, g.mode)],
      ['rules from', (g) => g.rulesFrom || '-'],
      ['limits', (g) => limitsText(g.limits)],
      [
        'usage',
        (g) =>
          `${g.usage.runsToday} runs, $${g.usage.costTodayUsd.toFixed(2)} today` +
          (g.usage.busiestSender
            ? `; ${g.usage.busiestSender.sender}: ${g.usage.busiestSender.messages} msgs this hour`
            : ''),
      ],
      [
        'last 24 h',
        (g) =>
          `served ${g.decisions.served}, denied ${g.decisions.denied}, pending ${g.decisions.pending}, ` +
          `limited ${g.decisions.limited}; approved ${g.codes.approved}, rejected ${g.codes.rejected}`,
      ],
    ],
    r.groups.map((g) => ({ ...g, __id: g.folder, __class: 'group' })),
    'no groups registered',
  );
  $('admins').textContent = r.admins.length
    ? `GATED_ADMINS (owners everywhere): ${r.admins.join(', ')}`
    : 'no GATED_ADMINS';
  table(
    $('members'),
    [
      ['group', (m) => m.group_folder],
      ['sender', (m) => m.sender],
      ['role', (m) => el('span', `role ${m.role}`, m.role)],
      ['note', (m) => m.note || ''],
    ],
    r.groups.flatMap((g) => g.members).map((m) => ({ ...m, __id: m.id, __class: `member ${m.role}` })),
    'no member rows: open groups serve everyone',
  );
  const heldCols = [
    ['id', (m) => m.id],
    ['state', (m) => el('span', `state ${m.state}`, m.state)],
    ['group', (m) => m.group_folder || ''],
    ['chat', (m) => m.chat_jid],
    ['sender', (m) => m.sender],
    ['reason', (m) => m.reason || ''],
    ['text', (m) => (m.content.length > 80 ? `${m.content.slice(0, 80)}…` : m.content)],
  ];
  if (page.hasToken()) {
    heldCols.push([
      '',
      (m) => (m.state === 'limited' ? button('release chat', 'release', () => void release(m.chat_jid)) : ''),
    ]);
  }
  table(
    $('withheld'),
    heldCols,
    r.withheld.map((m) => ({ ...m, __id: m.id, __class: `withheld ${m.state}` })),
    'nothing withheld',
  );
  table(
    $('audit'),
    [
      ['id', (a) => a.id],
      ['when', (a) => localTime(a.at)],
      ['who', (a) => a.actor],
      ['what', (a) => `${a.subject}.${a.action}`],
      ['key', (a) => a.row_key || ''],
      ['before', (a) => el('span', 'json', a.before || '')],
      ['after', (a) => el('span', 'json', a.after || '')],
    ],
    r.audit.map((a) => ({ ...a, __id: a.id, __class: `audit ${a.action}` })),
    'no changes recorded yet',
  );
}

const page = adminPage({ url: '/api/access', render, refreshMs: 3000 });
const { auth, notice } = page;
const refresh = page.refresh;
page.start();
