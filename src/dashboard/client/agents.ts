/** The Agents page: the team's executor agents, refreshed every 2 s. */
import { api, isMissingRoute } from './api.ts';
import type { AgentList, AgentView } from './answers.ts';
import { h, messages, poll, replaceKeepingFocus, table } from './dom.ts';
import { fmtAgo, fmtTime, userText } from './format.ts';

export function render(main: HTMLElement): () => void {
  const msg = messages();
  const body = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  main.append(
    h('h1', null, 'Agents'),
    h('p', { class: 'lead' }, 'Executor agents connected to this team, refreshed every 2 seconds.'),
    msg.status,
    msg.error,
    body,
  );
  return poll(async () => {
    try {
      const r = await api<AgentList>('GET', '/agents');
      msg.fail(null);
      body.setAttribute('aria-busy', 'false');
      replaceKeepingFocus(body, view(r.agents || []));
    } catch (e) {
      body.setAttribute('aria-busy', 'false');
      if (isMissingRoute(e)) {
        msg.say('This gateway does not list agents yet (no GET /admin/v1/agents).');
        body.replaceChildren();
        return;
      }
      msg.fail(e);
    }
  }, 2000);
}

function runtimes(a: AgentView): HTMLElement | string {
  if (a.runtimes.length === 0) return 'none found';
  return h(
    'ul',
    { class: 'runtimes' },
    a.runtimes.map((r) => h('li', null, userText(r.name, false, 'rt'), ' ', userText(String(r.version || '').split('\n')[0], false, 'ver'))),
  );
}

function view(agents: AgentView[]): HTMLElement {
  if (agents.length === 0)
    return h(
      'p',
      { class: 'empty' },
      'No agent has joined this team yet. Start one with gatehouse agent --url … --token-file <agent token file> --root <workspace>.',
    );
  const now = Date.now();
  return table(
    'Agents (' + agents.length + ')',
    ['Agent', 'State', 'Sandbox', 'Load', 'Labels', 'Runtimes', 'Last heartbeat', 'Connected since'],
    agents.map((a) => {
      const seen = a.last_seen;
      return h(
        'tr',
        { 'data-agent': a.agent_id },
        h('th', { scope: 'row' }, userText(a.agent_id, false, 'agent-id'), h('div', { class: 'sub' }, userText(a.version || '', false, 'version'))),
        h('td', null, h('span', { class: 'badge ' + a.state }, a.state)),
        h('td', null, userText(a.sandbox || '')),
        h('td', null, a.running + ' / ' + a.capacity + ' slots'),
        h(
          'td',
          null,
          a.labels.map((l, i) => [i ? ', ' : '', userText(l)]),
        ),
        h('td', null, runtimes(a)),
        h('td', null, h('time', { datetime: seen ? new Date(seen).toISOString() : '', title: fmtTime(seen) }, fmtAgo(seen, now))),
        h('td', null, fmtTime(a.connected_at)),
      );
    }),
  );
}
