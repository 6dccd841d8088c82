// The one list of everything waiting on a person (docs/WORKFLOWS.md, "The dashboard"): agents' tool calls
// asked about, workflow gates and strangers' pairing codes (GET /api/waiting), refreshed every 2 s. Every
// text from the server is set with textContent (see common.js).
import { age, el, getJson, table } from './common.js';

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 2000;

async function refresh() {
  try {
    const r = await getJson('/api/waiting');
    table(
      $('waiting'),
      [
        ['kind', (w) => el('span', `waiting-kind ${w.kind.replace(/ /g, '-')}`, w.kind)],
        ['code', (w) => el('span', 'code', w.code)],
        ['group', (w) => w.group_folder],
        ['chat', (w) => w.chat_jid],
        ['what', (w) => el('span', 'json', w.what)],
        ['who decides', (w) => w.who_decides],
        ['asked', (w) => `${age(r.now - w.asked_at)} ago`],
        ['expires in', (w) => age(Math.max(0, w.expires_at - r.now))],
      ],
      r.items.map((w) => ({ ...w, __id: w.code })),
      'nothing waits on a person',
    );
    $('notice').hidden = true;
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $('notice').textContent = err.message;
    $('notice').hidden = false;
  }
}

void refresh();
setInterval(() => void refresh(), REFRESH_MS);
