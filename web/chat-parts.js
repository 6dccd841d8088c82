// What a chat line shows besides its text: files (an upload of the user, a file an agent sent) and the
// draft of an answer in progress. Files come from /api/chat/file, which serves only this chat's files; the
// page never builds a path, only the row id and the file's position.
import { el } from './common.js';
import { markdownNode } from './markdown.js';

// The types a browser shows as pictures (the server sends every other type as a download).
const INLINE = /^image\/(jpeg|png|gif|webp)$/;

/** "12 KB" for a byte count, or '' when unknown. */
function size(n) {
  if (typeof n !== 'number') return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${Math.round(n / 1024)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** The URL of file `seq` of row `id` in the web chat of `group`. */
export function fileUrl(group, id, seq) {
  return `/api/chat/file?group=${encodeURIComponent(group)}&id=${id}&seq=${seq}`;
}

/**
 * One file of a line: a picture when it is an image that has been saved, a player when it is audio (a voice
 * message, a spoken reply: docs/VOICE.md) with its download link, a download link when it is another saved
 * file, and its name alone while an upload waits to be saved.
 */
export function fileNode(group, id, f) {
  const label = [f.name, size(f.size)].filter(Boolean).join(' · ');
  if (!f.ready) return el('span', 'file pending', `${label} (uploading)`, { 'data-seq': String(f.seq) });
  const url = fileUrl(group, id, f.seq);
  if (INLINE.test(f.mime)) {
    const a = el('a', 'file image', null, { href: url, target: '_blank', rel: 'noopener' });
    a.append(el('img', '', null, { src: url, alt: f.name, loading: 'lazy' }));
    return a;
  }
  if (/^audio\//.test(f.mime)) {
    const box = el('span', 'file audio');
    box.append(el('audio', '', null, { src: url, controls: '', preload: 'none' }));
    box.append(el('a', 'file download', `↓ ${label}`, { href: url, download: f.name }));
    return box;
  }
  return el('a', 'file download', `↓ ${label}`, { href: url, download: f.name });
}

/**
 * The draft bubble of a pane: created by the first `draft` event of a turn, its text replaced by each later
 * one (an event carries the whole text so far), removed when its answer arrives. It sits after every line.
 */
export class DraftBubble {
  constructor(lines) {
    this.lines = lines;
    this.li = null;
    this.id = null;
  }

  /** Applies one `draft` event: `{id, text}`, text null when the draft went away. */
  apply(d) {
    if (d.text === null) {
      if (this.id === d.id) this.clear();
      return;
    }
    if (!this.li || this.id !== d.id) {
      this.clear();
      this.id = d.id;
      // Above any number a row id reaches, so lines arriving later are inserted before it.
      this.li = el('li', 'line agent draft', null, { 'data-id': String(Number.MAX_SAFE_INTEGER) });
      this.li.dataset.draft = d.id;
      this.texts = el('span', 'texts');
      this.li.append(el('span', 'who', 'agent · typing…'), this.texts);
      this.lines.append(this.li);
    }
    // Rendered as the answer will be: marked reads half-written Markdown (an open fence, a lone `**`) as
    // far as it goes, so the draft never shows raw markup and never breaks.
    this.texts.replaceChildren(markdownNode(d.text));
    this.lines.scrollTop = this.lines.scrollHeight;
  }

  clear() {
    this.li?.remove();
    this.li = null;
    this.id = null;
  }
}

/** What a decided approval's line says instead of its buttons. */
function decidedLabel(a) {
  if (a.state === 'expired') return 'not decided in time: denied';
  if (a.state === 'cancelled') return 'cancelled: its turn ended first, nothing ran';
  return `${a.state} by ${a.decided_by || 'someone'}`;
}

/**
 * The tool approvals of a pane (docs/WEB.md, "Tool approvals"): a question line gets Approve and Reject
 * while it is pending; a press posts to /api/chat/press, and gated decides whether this visitor may. When
 * the follow-up that says who decided arrives (or the question arrives already decided), the buttons give
 * way to that.
 */
export class ApprovalBoxes {
  /** `press(code, approve)` posts the press; it rejects with the reason when the post fails. */
  constructor(press) {
    this.press = press;
    this.boxes = new Map();
  }

  /** The controls to append to a line that carries `approval`, or null for a follow-up line. */
  node(a) {
    const box = el('div', 'approval');
    this.fill(box, a);
    if (!a.asks) {
      this.update(a);
      return null;
    }
    this.boxes.set(a.code, box);
    return box;
  }

  /** A newer state of approval `a.code` (a follow-up line): its question's box shows it. */
  update(a) {
    const box = this.boxes.get(a.code);
    if (box && box.dataset.state === 'pending' && a.state !== 'pending') this.fill(box, a);
  }

  fill(box, a) {
    box.dataset.code = a.code;
    box.dataset.state = a.state;
    if (a.state !== 'pending') {
      box.replaceChildren(el('span', 'decided', decidedLabel(a)));
      return;
    }
    const button = (label, approve) => {
      const b = el('button', approve ? 'approve' : 'reject', label, { type: 'button' });
      b.addEventListener('click', () => {
        for (const x of box.querySelectorAll('button')) x.disabled = true;
        // Enabled again once posted: a refusal (not an approver) arrives as a line of the chat.
        this.press(a.code, approve).finally(() => {
          for (const x of box.querySelectorAll('button')) x.disabled = false;
        });
      });
      return b;
    };
    box.replaceChildren(button('Approve', true), button('Reject', false));
  }
}
