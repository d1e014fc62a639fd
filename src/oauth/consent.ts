/**
 * The consent page at /authorize: a signed-in member (src/members/: the identity provider's session,
 * or Cloudflare Access) picks one of their teams and grants an MCP client the scopes their role
 * allows, as themselves; the form carries the session's CSRF token and must come from this origin.
 * Without a signed-in member, a team admin grants with an admin token, which the form posts itself
 * (a cross-site page cannot forge that). The authorization request is validated again by the
 * library from the same query string on every step. A client with a metadata document (an HTTPS
 * `client_id`) is shown by the host that publishes it, which the fetch verified; a registered client's
 * name is marked unverified. Everything the client or a person chose (its name, its redirect URI,
 * scopes, a team or member name) is escaped, shown with its control and bidi characters as visible
 * escapes and isolated in <bdi>, so it cannot reorder the page's own sentences; the page cannot be
 * framed and runs no script.
 */
import { html, raw } from 'hono/html';
import type { ConsentDescription } from '@cloudflare/workers-oauth-provider';
import { visible } from '../contracts/visible-text.ts';

export interface ConsentView {
  details: ConsentDescription;
  grantable: readonly string[];
  team?: string;
  checked?: string[];
  error?: string;
  /** The signed-in person and their teams: the member form instead of the admin-token form. */
  member?: { name: string; teams: { team: string; role: string }[]; csrf: string | null };
  /** Where a person signs in with the identity provider and comes back here. */
  signInUrl?: string;
}

/** Text someone else chose, as the page shows it: escapes for what would act on the page, in its own direction. */
const shown = (text: string) => html`<bdi>${visible(text)}</bdi>`;

const DESCRIBE: Record<string, string> = {
  execute: 'run commands and runtimes through the team policy (execute, runtime_execute, run_script)',
  'artifacts:read': "search the team's job outputs (query_output)",
};

export function consentPage(v: ConsentView) {
  const d = v.details;
  const checked = new Set(v.checked ?? v.grantable.filter((s) => d.scope.length === 0 || d.scope.includes(s)));
  const asked = d.scope.filter((s) => !v.grantable.includes(s));
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Authorize ${visible(d.clientName)} — Gatehouse</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 36rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
  label { display: block; margin: .5em 0 .2em; font-weight: 600; }
  input[type=text], input[type=password] { width: 100%; box-sizing: border-box; padding: .45em; font: inherit; }
  fieldset { margin: 1em 0; } .scope label { font-weight: normal; display: inline; }
  .warn { background: #fff4ce; padding: .6em; border-radius: 4px; }
  .verified { background: #e6f4ea; padding: .6em; border-radius: 4px; overflow-wrap: anywhere; }
  .error { background: #fde7e9; padding: .6em; border-radius: 4px; }
  button { font: inherit; padding: .45em 1.2em; margin-right: .6em; }
</style>
</head>
<body>
<main>
<h1>Allow <strong id="client-name">${shown(d.clientName)}</strong> to use Gatehouse?</h1>
${
  d.clientDomain
    ? html`<p class="verified" id="client-verified">Verified app from <strong id="client-domain">${shown(d.clientDomain)}</strong>: its description is published at <code id="client-id">${shown(d.clientId)}</code>. The name above is what that site says about itself.</p>`
    : html`<p id="client-unverified">This app registered itself; its name is not verified.</p>`
}
<p>Access will be sent to <strong id="redirect-host">${shown(d.redirectHost)}</strong>.</p>
${d.redirectIsLoopback ? html`<p class="warn" role="note"><strong>This sends access to an app on your computer.</strong> Continue only if you just started signing in from it.</p>` : ''}
${v.error ? html`<p class="error" role="alert" id="error">${visible(v.error, false, true)}</p>` : ''}
<form method="post">
${
  v.member
    ? html`  <p id="signed-in">Signed in as <strong>${shown(v.member.name)}</strong>; the app acts as you.</p>
  <input type="hidden" name="as" value="member">
  ${v.member.csrf ? html`<input type="hidden" name="csrf" value="${v.member.csrf}">` : ''}
  <label for="team">Team</label>
  <select id="team" name="team" required>
    ${v.member.teams.map((t) => html`<option value="${t.team}" ${t.team === v.team ? raw('selected') : ''}>${visible(t.team)} (${visible(t.role)})</option>`)}
  </select>`
    : html`  ${v.signInUrl ? html`<p><a id="sign-in" href="${v.signInUrl}">Sign in with your identity provider</a> to connect the app as yourself, or use an admin token:</p>` : ''}
  <label for="admin_token">Admin token of the team</label>
  <input type="password" id="admin_token" name="admin_token" autocomplete="off" required aria-describedby="token-help">
  <small id="token-help">A token with the <code>admin</code> scope (<code>gatehouse token create --scope admin</code>); it is checked, never stored.</small>
  <label for="team">Team to grant</label>
  <input type="text" id="team" name="team" value="${v.team ?? ''}" required pattern="[a-z0-9][a-z0-9_-]{0,62}" aria-describedby="team-help">
  <small id="team-help">Must be the admin token's own team.</small>`
}
  <fieldset>
    <legend>Scopes to grant</legend>
    ${v.grantable.map((s) => html`<div class="scope"><input type="checkbox" id="scope-${s}" name="scope" value="${s}" ${checked.has(s) ? raw('checked') : ''}> <label for="scope-${s}"><code>${shown(s)}</code> — ${DESCRIBE[s] ?? shown(s)}</label></div>`)}
    ${asked.length ? html`<p><small>Also asked for, never granted to an OAuth client: ${asked.map((s, i) => html`${i ? ', ' : ''}${shown(s)}`)}</small></p>` : ''}
  </fieldset>
  <button type="submit" name="decision" value="approve" id="approve">Allow</button>
  <button type="submit" name="decision" value="deny" id="deny" formnovalidate>Deny</button>
</form>
</main>
</body>
</html>`;
}

export function errorPage(message: string) {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization failed — Gatehouse</title></head>
<body><main><h1>This authorization request cannot continue</h1><p role="alert" id="error">${visible(message, false, true)}</p>
<p>Start the sign-in again from your MCP client.</p></main></body></html>`;
}
