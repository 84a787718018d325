// The status line under the header: errors and notes, said in words.
import { h } from './dom.js';

export function showStatus(text, kind = 'error') {
  const line = document.getElementById('status');
  line.hidden = !text;
  line.className = `status status-${kind}`;
  line.replaceChildren(text ? h('strong', {}, kind === 'error' ? 'Error: ' : 'Note: ') : '', text ?? '');
}
