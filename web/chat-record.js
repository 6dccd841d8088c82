// The record button of a pane's composer (docs/VOICE.md): while it is on, MediaRecorder records the
// microphone; pressed again, the recording goes out as an audio file like any upload (with what is typed as
// its caption), and gated transcribes it before the agent reads it. The button is left out where the
// browser cannot record (no MediaRecorder, or a page that is not a secure context).
import { el } from './common.js';

// What the browser is asked to record, in this order; Chromium and Firefox give WebM/Opus, Safari MP4.
const TYPES = ['audio/webm;codecs=opus', 'audio/ogg;codecs=opus', 'audio/webm', 'audio/mp4'];

const EXTENSIONS = { 'audio/webm': 'webm', 'audio/ogg': 'ogg', 'audio/mp4': 'm4a' };

/**
 * The button and its clock (`● 0:03`, with `data-seconds`), or null where recording is impossible.
 * `recorded(file)` gets the finished recording as a File; `failed(text)` says why none was made.
 */
export function recordControl(recorded, failed) {
  if (typeof MediaRecorder === 'undefined' || !navigator.mediaDevices?.getUserMedia) return null;
  const button = el('button', 'record', 'record', {
    type: 'button',
    title: 'record a voice message',
    'aria-pressed': 'false',
  });
  const clock = el('span', 'recording', '', { 'aria-live': 'polite' });
  clock.hidden = true;
  let rec = null;
  let timer = null;
  let started = 0;
  const tick = () => {
    const s = Math.floor((Date.now() - started) / 1000);
    clock.textContent = `● ${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
    clock.dataset.seconds = String(s);
  };
  const shown = (on) => {
    button.textContent = on ? 'stop' : 'record';
    button.setAttribute('aria-pressed', String(on));
    clock.hidden = !on;
    if (!on) clearInterval(timer);
  };
  button.addEventListener('click', async () => {
    if (rec) return rec.stop();
    let stream;
    try {
      // As the microphone hears it: the processing made for calls (echo cancelling, noise suppression,
      // gain control) changes speech in ways a transcriber hears worse, and no call is in progress.
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
      });
    } catch (err) {
      return failed(`cannot record: ${err.message}`);
    }
    const asked = TYPES.find((t) => MediaRecorder.isTypeSupported(t));
    const r = new MediaRecorder(stream, asked ? { mimeType: asked } : {});
    const chunks = [];
    r.addEventListener('dataavailable', (e) => {
      if (e.data.size > 0) chunks.push(e.data);
    });
    r.addEventListener('stop', () => {
      for (const t of stream.getTracks()) t.stop();
      rec = null;
      shown(false);
      // The type without its codecs: what the upload claims and gated stores (audio/webm).
      const mime = (r.mimeType || asked || 'audio/webm').split(';')[0].trim();
      const blob = new Blob(chunks, { type: mime });
      if (blob.size === 0) return failed('nothing was recorded');
      recorded(new File([blob], `recording.${EXTENSIONS[mime] || 'webm'}`, { type: mime }));
    });
    rec = r;
    r.start();
    started = Date.now();
    tick();
    timer = setInterval(tick, 250);
    shown(true);
  });
  return { button, clock };
}
