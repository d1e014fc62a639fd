/** The landing page at `/`: plain HTML, no scripts, readable without styles. */
import { html } from 'hono/html';

export function landingPage(o: { origin: string; mcpUrl: string }) {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gatehouse — governed command execution over MCP</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
  code, pre { font: 14px/1.4 ui-monospace, monospace; background: #f3f3f3; border-radius: 4px; }
  code { padding: 0 .25em; } pre { padding: .75em; overflow-x: auto; }
  dt { font-weight: 600; margin-top: .75em; }
</style>
</head>
<body>
<main>
<h1>Gatehouse</h1>
<p>A hosted MCP endpoint for <strong>governed command execution</strong>: AI agents and API-token clients run
commands that the team's policy allows, audited, on the team's own executor agents inside a sandbox.</p>
<dl>
  <dt>MCP endpoint</dt>
  <dd><code>${o.mcpUrl}</code> — MCP Streamable HTTP; send <code>Authorization: Bearer &lt;token&gt;</code>.</dd>
  <dt>Dashboard</dt>
  <dd><a href="/dashboard">${o.origin}/dashboard</a> — agents, jobs, audit, policy and tokens (sign in with an admin token).</dd>
  <dt>Discovery</dt>
  <dd><a href="/.well-known/oauth-protected-resource">/.well-known/oauth-protected-resource</a> (which issuer and scopes to use)</dd>
</dl>
<h2>Connect a client</h2>
<pre>claude mcp add --transport http gatehouse ${o.mcpUrl} --header "Authorization: Bearer &lt;token&gt;"</pre>
<p>Tokens come from your team admin (<code>gatehouse token create --scope execute --scope artifacts:read</code>).</p>
<h2>Run an executor agent</h2>
<pre>gatehouse agent --url ${o.origin} --token-file /etc/gatehouse/agent.token --root /srv/gatehouse/workspace</pre>
</main>
</body>
</html>`;
}
