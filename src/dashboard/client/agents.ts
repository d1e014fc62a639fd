/** Browser module `agents.js`: the team's executor agents, refreshed every 2 s. */
export const AGENTS_JS = String.raw`
import { api, fmtAgo, fmtTime, h, isMissingRoute, messages, pick, poll, replaceKeepingFocus, table, userText } from './core.js';

export function render(main) {
  const msg = messages();
  const body = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  main.append(
    h('h1', null, 'Agents'),
    h('p', { class: 'lead' }, 'Executor agents connected to this team, refreshed every 2 seconds.'),
    msg.status, msg.error, body);
  return poll(async () => {
    try {
      const r = await api('GET', '/agents');
      msg.fail(null);
      body.setAttribute('aria-busy', 'false');
      replaceKeepingFocus(body, view(r.agents || []));
    } catch (e) {
      body.setAttribute('aria-busy', 'false');
      if (isMissingRoute(e)) { msg.say('This gateway does not list agents yet (no GET /admin/v1/agents).'); body.replaceChildren(); return; }
      msg.fail(e);
    }
  }, 2000);
}

function runtimes(a) {
  const rs = pick(a, 'runtimes') || [];
  const list = Array.isArray(rs) ? rs : Object.keys(rs).map((k) => Object.assign({ name: k }, typeof rs[k] === 'object' ? rs[k] : { version: rs[k] }));
  if (list.length === 0) return 'none found';
  return h('ul', { class: 'runtimes' }, list.map((r) => h('li', null, userText(r.name, false, 'rt'), ' ', userText(String(r.version || '').split('\n')[0], false, 'ver'))));
}

function view(agents) {
  if (agents.length === 0) return h('p', { class: 'empty' }, 'No agent has joined this team yet. Start one with gatehouse agent --url … --token-file <agent token file> --root <workspace>.');
  const now = Date.now();
  return table('Agents (' + agents.length + ')', ['Agent', 'State', 'Sandbox', 'Load', 'Labels', 'Runtimes', 'Last heartbeat', 'Connected since'],
    agents.map((a) => {
      const state = pick(a, 'state') || (pick(a, 'connected') ? 'connected' : 'disconnected');
      const cap = pick(a, 'capacity');
      const running = pick(a, 'running', 'load', 'active') || 0;
      const seen = pick(a, 'last_seen', 'lastSeen', 'last_seen_at', 'lastSeenAt');
      return h('tr', { 'data-agent': pick(a, 'agent_id', 'id') },
        h('th', { scope: 'row' }, userText(pick(a, 'agent_id', 'id'), false, 'agent-id'), h('div', { class: 'sub' }, userText(pick(a, 'version') || '', false, 'version'))),
        h('td', null, h('span', { class: 'badge ' + state }, state)),
        h('td', null, userText(pick(a, 'sandbox') || '')),
        h('td', null, running + ' / ' + (cap === undefined ? '?' : cap) + ' slots'),
        h('td', null, (pick(a, 'labels') || []).map((l, i) => [i ? ', ' : '', userText(l)])),
        h('td', null, runtimes(a)),
        h('td', null, h('time', { datetime: seen ? new Date(seen).toISOString() : '' , title: fmtTime(seen) }, fmtAgo(seen, now))),
        h('td', null, fmtTime(pick(a, 'connected_at', 'connectedAt'))));
    }));
}
`;
