/**
 * `npm start`: the whole thing locally — gateway (wrangler dev, local D1/R2 under .gatehouse/)
 * plus one executor agent with the strongest sandbox this machine has. Prints the MCP URL, a
 * dev client token and a ready-to-paste `claude mcp add` line.
 *
 * State that persists between runs: .gatehouse/state (D1 sqlite, R2 files, DO storage),
 * .gatehouse/signing-key.json (generated on first start, never committed), .gatehouse/workspace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { generateSigningKey, mintToken } from '../src/auth/mint.ts';

const ROOT = resolve(import.meta.dirname, '..');
// GATEHOUSE_STATE_DIR lets tests (and a second local instance) keep their own state.
const STATE = resolve(process.env.GATEHOUSE_STATE_DIR ?? join(ROOT, '.gatehouse'));
const PORT = Number(process.env.PORT ?? 8787);
const HOST = '127.0.0.1';
const URL_BASE = `http://${HOST}:${PORT}`;
const TEAM = process.env.GATEHOUSE_TEAM ?? 'dev';
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const NODE = process.execPath;
// wrangler's shebang runs `node` from PATH: make that this (pinned Node 22) binary.
process.env.PATH = `${dirname(NODE)}:${process.env.PATH}`;

const children: ChildProcess[] = [];

function log(msg: string): void {
  process.stdout.write(`[gatehouse] ${msg}\n`);
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((ok, fail) => {
    const p = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, WRANGLER_SEND_METRICS: 'false' } });
    p.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`${cmd} ${args.join(' ')} exited with ${code}`))));
  });
}

async function signingKey(): Promise<string> {
  const file = join(STATE, 'signing-key.json');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const key = await generateSigningKey();
  writeFileSync(file, key + '\n', { mode: 0o600 });
  log(`generated a dev signing key: ${file}`);
  return key;
}

async function waitHealthy(deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    try {
      if ((await fetch(`${URL_BASE}/healthz`)).ok) return;
    } catch { /* not up yet */ }
    if (Date.now() > until) throw new Error(`the gateway did not answer on ${URL_BASE}/healthz within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function stopAll(code: number): never {
  for (const c of children) {
    try {
      if (c.pid) process.kill(-c.pid, 'SIGTERM');
    } catch { /* already gone */ }
  }
  setTimeout(() => process.exit(code), 1500).unref();
  process.exit(code);
}

async function main(): Promise<void> {
  mkdirSync(join(STATE, 'state'), { recursive: true });
  mkdirSync(join(STATE, 'workspace'), { recursive: true });
  const key = await signingKey();
  const issuer = URL_BASE;
  const audience = `${URL_BASE}/mcp`;
  // The secret and the URLs tokens are minted for; regenerated each start (the port may change).
  const envFile = join(STATE, 'dev.vars');
  writeFileSync(envFile, `GATEHOUSE_SIGNING_KEY='${key}'\nGATEHOUSE_ISSUER='${issuer}'\nGATEHOUSE_AUDIENCE='${audience}'\n`, { mode: 0o600 });

  log('applying D1 migrations (local)…');
  await run(WRANGLER, ['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', join(STATE, 'state')]);

  log(`starting the gateway on ${URL_BASE} (wrangler dev)…`);
  const gw = spawn(
    WRANGLER,
    ['dev', '--ip', HOST, '--port', String(PORT), '--persist-to', join(STATE, 'state'), '--env-file', envFile,
      '--show-interactive-dev-session=false', '--log-level', 'warn',
      ...(process.env.GATEHOUSE_INSPECTOR_PORT ? ['--inspector-port', process.env.GATEHOUSE_INSPECTOR_PORT] : [])],
    { cwd: ROOT, detached: true, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, WRANGLER_SEND_METRICS: 'false' } },
  );
  children.push(gw);
  gw.on('exit', (code) => {
    log(`the gateway exited (${code})`);
    stopAll(code ?? 1);
  });
  await waitHealthy(90_000);

  const ttlSeconds = 30 * 24 * 3600;
  const mint = (subject: string, scopes: string[]) => mintToken({ privateJwk: key, issuer, audience, team: TEAM, subject, scopes, ttlSeconds });
  const client = await mint('dev-client', ['execute', 'artifacts:read']);
  const admin = await mint('dev-admin', ['admin']);
  const agent = await mint('dev-agent', ['agent']);
  writeFileSync(join(STATE, 'tokens.json'), JSON.stringify({ team: TEAM, client: client.token, admin: admin.token, agent: agent.token }, null, 2) + '\n', { mode: 0o600 });

  log('starting one executor agent (strongest sandbox available)…');
  const agentArgs = [join(ROOT, 'executor/main.ts'), '--url', URL_BASE, '--token', agent.token, '--root', join(STATE, 'workspace'), '--id', 'local-agent'];
  if (process.env.GATEHOUSE_SANDBOX) agentArgs.push('--sandbox', process.env.GATEHOUSE_SANDBOX);
  const ag = spawn(NODE, agentArgs, { cwd: ROOT, detached: true, stdio: ['ignore', 'inherit', 'inherit'] });
  children.push(ag);
  ag.on('exit', (code) => log(`the executor agent exited (${code}); restart with: node executor/main.ts ${agentArgs.slice(1).join(' ').replace(agent.token, '<agent token from .gatehouse/tokens.json>')}`));

  const line = '─'.repeat(72);
  process.stdout.write(
    `\n${line}\n` +
      `Gatehouse is running (team "${TEAM}")\n\n` +
      `MCP URL:          ${audience}\n` +
      `dev client token: ${client.token}\n\n` +
      `Claude Code:\n  claude mcp add --transport http gatehouse ${audience} --header "Authorization: Bearer ${client.token}"\n\n` +
      `Admin CLI (policy, tokens, audit):\n  export GATEHOUSE_URL=${URL_BASE} GATEHOUSE_ADMIN_TOKEN=${admin.token}\n  npx gatehouse policy get\n\n` +
      `All tokens: ${join(STATE, 'tokens.json')}   Workspace: ${join(STATE, 'workspace')}   Ctrl-C stops everything.\n${line}\n\n`,
  );
}

process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));
main().catch((e) => {
  process.stderr.write(`[gatehouse] start failed: ${e instanceof Error ? e.message : String(e)}\n`);
  stopAll(1);
});
