// One message of a chat or a run, as the dashboard shows it: who, when, the text, and what gated did with
// it (state, route, session, the run that answered it, delivery). Columns this page does not know (added
// by newer parts of gated: attachments, drafts, usage, …) are listed as they are rather than hidden.
import { el, localTime } from './common.js';
import { auth, runLink } from './dash-core.js';

const KNOWN = new Set([
  'id',
  'chat_jid',
  'sender',
  'sender_name',
  'content',
  'content_length',
  'verb',
  'topic',
  'platform_msg_id',
  'reply_to',
  'timestamp',
  'is_from_me',
  'state',
  'group_folder',
  'session_topic',
  'target',
  'route_id',
  'weight',
  'threshold',
  'max_hold_ms',
  'held_at',
  'ready_at',
  'dispatched_at',
  'run_id',
  'attempts',
  'not_before',
  'error',
  'delivery',
  'delivery_attempts',
  'delivery_error',
  'delivered_at',
  'parts_sent',
  'reply_to_id',
  'kind',
  'answered_by',
  'run_result',
  'transcript',
  'audio',
]);

function tag(cls, text) {
  return el('span', `tag ${cls}`, text);
}

/** A list item for one message row of /api/dashboard/chat or /api/dashboard/run/:id. */
export function messageItem(m) {
  const out = m.is_from_me === 1;
  const li = el('li', `msg ${out ? 'out' : 'in'}`);
  li.dataset.id = String(m.id);
  const meta = el('div', 'meta');
  const who = out
    ? `gated (${m.kind || 'reply'})`
    : m.sender_name
      ? `${m.sender_name} <${m.sender}>`
      : m.sender;
  const when = el('span', 'when');
  when.append(localTime(m.timestamp));
  meta.append(el('span', 'who', who), when, el('span', 'mid', `#${m.id}`));
  if (!out) {
    if (m.verb && m.verb !== 'message') meta.append(tag('verb', m.verb));
    meta.append(tag(`state ${m.state || 'new'}`, m.state || 'not polled'));
    if (m.target) {
      const route = m.route_id ? ` (route ${m.route_id})` : '';
      meta.append(tag('route', `→ ${m.target}${route}`));
    }
    if (m.group_folder)
      meta.append(tag('session', `${m.group_folder}${m.session_topic ? '#' + m.session_topic : ''}`));
    if (m.attempts > 0) meta.append(tag('attempts', `${m.attempts} attempts`));
  } else {
    meta.append(tag(`delivery ${m.delivery || 'none'}`, m.delivery || 'not for delivery'));
    if (m.delivery_attempts > 0) meta.append(tag('attempts', `${m.delivery_attempts} tries`));
  }
  if (m.answered_by) {
    // An ended run shows its result; an open one only its link (the run view says running or idle).
    const r = el('span', `tag run ${m.run_result || 'open'}`);
    r.append(runLink(m.answered_by, `run #${m.answered_by}`));
    if (m.run_result) r.append(` ${m.run_result}`);
    meta.append(r);
  }
  li.append(meta);
  // A voice message's words (docs/VOICE.md): marked as a transcript, its audio playable beside them.
  const text = el('div', m.transcript === 1 ? 'text transcript' : 'text', m.content);
  if (m.content_length > m.content.length) {
    text.append(el('span', 'cut', ` … (${m.content_length.toLocaleString('en')} characters in all)`));
  }
  li.append(text);
  for (const a of Array.isArray(m.audio) ? m.audio : []) li.append(audioPlayer(m.id, a));
  const problem = m.error || m.delivery_error;
  if (problem) li.append(el('div', 'problem', problem));
  const extra = Object.entries(m).filter(([k, v]) => !KNOWN.has(k) && v !== null && v !== '');
  if (extra.length) {
    const box = el('div', 'extra');
    for (const [k, v] of extra)
      box.append(el('span', 'tag extra', `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`));
    li.append(box);
  }
  return li;
}

/**
 * A button that plays audio `a` of row `id`: fetched from /api/dashboard/audio with the typed token (an
 * <audio> element cannot send it) into a player that stays in place.
 */
function audioPlayer(id, a) {
  const box = el('div', 'audio');
  const play = el('button', 'play-audio', `▶ ${a.name}`, { type: 'button', title: 'play the audio' });
  play.addEventListener('click', async () => {
    play.disabled = true;
    try {
      const res = await fetch(`/api/dashboard/audio?id=${id}&seq=${a.seq}`, { headers: auth() });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const url = URL.createObjectURL(await res.blob());
      const player = el('audio', '', null, { src: url, controls: '' });
      box.replaceChildren(player);
      void player.play().catch(() => undefined);
    } catch (err) {
      play.disabled = false;
      box.append(el('span', 'bad', ` not played: ${err.message}`));
    }
  });
  box.append(play);
  return box;
}
