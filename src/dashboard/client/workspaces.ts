/**
 * The Workspaces page: the team's per-task workspaces (docs/workspaces.md) with their agent, size, quota,
 * last use and expiry, and a Delete button per row that deletes the workspace on its agent after confirming.
 */
import type { WorkspaceView } from '../../contracts/workspaces.ts';
import { api } from './api.ts';
import { h, messages, table, type Messages } from './dom.ts';
import { fmtBytes, fmtTime, userText } from './format.ts';

export function render(main: HTMLElement): null {
  const msg = messages();
  const body = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  main.append(
    h('h1', null, 'Workspaces'),
    h(
      'p',
      { class: 'lead' },
      'Directories a job asked for by name (execute {"workspace": …}); each lives on one executor agent until deleted here, with gatehouse workspaces rm <id>, or after its idle time.',
    ),
    msg.status,
    msg.error,
    body,
  );
  const load = async (): Promise<void> => {
    body.setAttribute('aria-busy', 'true');
    try {
      const r = await api<{ workspaces: WorkspaceView[] }>('GET', '/workspaces');
      body.replaceChildren(view(r.workspaces, load, msg));
    } finally {
      body.setAttribute('aria-busy', 'false');
    }
  };
  load().catch((e: unknown) => msg.fail(e));
  return null;
}

function view(list: WorkspaceView[], reload: () => Promise<void>, msg: Messages): HTMLElement {
  if (!list.length) return h('p', { class: 'empty' }, 'No workspaces yet. A job run with "workspace" makes one.');
  return table(
    `Workspaces (${list.length})`,
    ['Workspace', 'Agent', 'Size', 'Quota', 'Created', 'Last used', 'Expires', ''],
    list.map((w) => {
      const del = h('button', { type: 'button', class: 'danger', 'aria-label': `Delete workspace ${w.id}` }, 'Delete');
      del.addEventListener('click', async () => {
        if (!window.confirm(`Delete workspace ${w.id} and every file in it on agent ${w.agent_id}? This cannot be undone.`)) return;
        msg.clear();
        del.disabled = true;
        try {
          await api('DELETE', `/workspaces/${encodeURIComponent(w.id)}`);
          msg.say(`Deleted workspace ${w.id}.`);
          await reload();
        } catch (e) {
          msg.fail(e);
          del.disabled = false;
        }
      });
      return h(
        'tr',
        { 'data-workspace': w.id },
        h('th', { scope: 'row' }, h('code', null, w.id)),
        h('td', null, userText(w.agent_id), w.agent_connected ? '' : h('div', { class: 'hint' }, 'not connected')),
        h('td', null, fmtBytes(w.bytes)),
        h('td', null, fmtBytes(w.quota_bytes)),
        h('td', null, fmtTime(w.created_at)),
        h('td', null, fmtTime(w.last_used_at)),
        h('td', null, fmtTime(w.expires_at)),
        h('td', null, del),
      );
    }),
  );
}
