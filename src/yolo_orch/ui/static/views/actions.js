// Cancel and delete buttons for a job, shared by the list and the job page.
import { request } from '../api.js';
import { h, shortId } from '../dom.js';
import { isTerminal } from '../meta.js';
import { showStatus } from '../status.js';

export function jobActions(job, { onDeleted } = {}) {
  if (!isTerminal(job.state)) {
    return h('button', {
      type: 'button',
      class: 'small cancel',
      disabled: job.cancel_requested,
      'aria-label': `Cancel job ${shortId(job.id)}`,
      onclick: async (event) => {
        event.currentTarget.disabled = true;
        try {
          await request(`/v1/jobs/${job.id}/cancel`, { method: 'POST' });
        } catch (error) {
          report(error);
          event.target.disabled = false;
        }
      },
    }, 'Cancel');
  }
  return h('button', {
    type: 'button',
    class: 'small delete',
    'aria-label': `Delete job ${shortId(job.id)}`,
    onclick: async () => {
      if (!window.confirm(`Delete job ${shortId(job.id)} and its files?`)) return;
      try {
        await request(`/v1/jobs/${job.id}`, { method: 'DELETE' });
        onDeleted?.();
      } catch (error) {
        report(error);
      }
    },
  }, 'Delete');
}

function report(error) {
  if (error.status !== 401 && error.status !== 403) showStatus(error.message); // those: already
}
