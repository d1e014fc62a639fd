/**
 * `npm start`: the whole thing locally — gateway (wrangler dev, local D1/R2 under .gatehouse/)
 * plus one executor agent with the strongest sandbox this machine has. Prints the MCP URL, a
 * dev client token and a ready-to-paste `claude mcp add` line.
 *
 * State that persists between runs: .gatehouse/state (D1 sqlite, R2 files, DO storage),
 * .gatehouse/signing-key.json (generated on first start, never committed), .gatehouse/workspace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
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

// Every child's chatter goes to a log file under the state dir; the console shows our own lines and
// the banner. CLOUDFLARE_CF_FETCH_ENABLED=false stops wrangler's lookup of workers.cloudflare.com
// for a `Request.cf` sample (two stack traces offline); local requests get a placeholder cf object.
const CHILD_ENV = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', NO_COLOR: '1' };

function logFile(name: string): number {
  return openSync(join(STATE, name), 'w');
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(join(STATE, file), 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

function run(cmd: string, args: string[], log: string): Promise<void> {
  const fd = logFile(log);
  return new Promise((ok, fail) => {
    const p = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', fd, fd], env: CHILD_ENV });
    p.on('exit', (code) => {
      closeSync(fd);
      if (code === 0) ok();
      else fail(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${tail(log)}`));
    });
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

/** Waits for the agent's "connected to" line in its log; answers the sandbox it chose. */
async function agentConnected(ag: ChildProcess, deadlineMs: number): Promise<string> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const text = tail('agent.log', 200);
    if (/connected to /.test(text)) return /sandbox: (\w+)/.exec(text)?.[1] ?? 'unknown';
    if (ag.exitCode !== null) throw new Error(`the executor agent exited (${ag.exitCode}):\n${tail('agent.log')}`);
    if (Date.now() > until) throw new Error(`the executor agent did not connect within ${deadlineMs} ms:\n${tail('agent.log')}`);
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
  await run(WRANGLER, ['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', join(STATE, 'state')], 'migrations.log');

  log(`starting the gateway on ${URL_BASE} (wrangler dev; log: ${join(STATE, 'gateway.log')})…`);
  const gwLog = logFile('gateway.log');
  const gw = spawn(
    WRANGLER,
    ['dev', '--ip', HOST, '--port', String(PORT), '--persist-to', join(STATE, 'state'), '--env-file', envFile,
      '--show-interactive-dev-session=false', '--log-level', 'warn',
      ...(process.env.GATEHOUSE_INSPECTOR_PORT ? ['--inspector-port', process.env.GATEHOUSE_INSPECTOR_PORT] : [])],
    { cwd: ROOT, detached: true, stdio: ['ignore', gwLog, gwLog], env: CHILD_ENV },
  );
  children.push(gw);
  gw.on('exit', (code) => {
    log(`the gateway exited (${code}); the end of ${join(STATE, 'gateway.log')}:\n${tail('gateway.log')}`);
    stopAll(code ?? 1);
  });
  await waitHealthy(90_000);

  const ttlSeconds = 30 * 24 * 3600;
  const mint = (subject: string, scopes: string[]) => mintToken({ privateJwk: key, issuer, audience, team: TEAM, subject, scopes, ttlSeconds });
  const client = await mint('dev-client', ['execute', 'artifacts:read']);
  const admin = await mint('dev-admin', ['admin']);
  const agent = await mint('dev-agent', ['agent']);
  writeFileSync(join(STATE, 'tokens.json'), JSON.stringify({ team: TEAM, client: client.token, admin: admin.token, agent: agent.token }, null, 2) + '\n', { mode: 0o600 });

  log(`starting one executor agent (strongest sandbox available; log: ${join(STATE, 'agent.log')})…`);
  // The token goes in a file only we can read, never on the command line (ps shows argv to every local user).
  const tokenFile = join(STATE, 'agent.token');
  writeFileSync(tokenFile, agent.token + '\n', { mode: 0o600 });
  chmodSync(tokenFile, 0o600);
  const agentArgs = [join(ROOT, 'executor/main.ts'), '--url', URL_BASE, '--token-file', tokenFile, '--root', join(STATE, 'workspace'), '--id', 'local-agent'];
  if (process.env.GATEHOUSE_SANDBOX) agentArgs.push('--sandbox', process.env.GATEHOUSE_SANDBOX);
  // Asking for no isolation by name is the explicit development choice the agent wants.
  if (process.env.GATEHOUSE_SANDBOX === 'none') agentArgs.push('--allow-no-isolation');
  const agentLog = logFile('agent.log');
  const ag = spawn(NODE, agentArgs, { cwd: ROOT, detached: true, stdio: ['ignore', agentLog, agentLog] });
  children.push(ag);
  ag.on('exit', (code) => log(`the executor agent exited (${code}); the end of ${join(STATE, 'agent.log')}:\n${tail('agent.log')}\nrestart it with: node executor/main.ts ${agentArgs.slice(1).join(' ')}`));
  const sandbox = await agentConnected(ag, 60_000);

  const line = '─'.repeat(72);
  process.stdout.write(
    `\n${line}\n` +
      `Gatehouse is running (team "${TEAM}"; agent local-agent, sandbox: ${sandbox})\n\n` +
      `MCP URL:          ${audience}\n` +
      `dev client token: ${client.token}\n\n` +
      `Claude Code:\n  claude mcp add --transport http gatehouse ${audience} --header "Authorization: Bearer ${client.token}"\n\n` +
      `Admin CLI (policy, tokens, audit):\n  export GATEHOUSE_URL=${URL_BASE} GATEHOUSE_ADMIN_TOKEN=${admin.token}\n  npx gatehouse policy get\n\n` +
      `Dashboard:        ${URL_BASE}/dashboard (sign in with the admin token)\n` +
      `Home page:        ${URL_BASE}/\n` +
      `All tokens: ${join(STATE, 'tokens.json')}   Workspace: ${join(STATE, 'workspace')}\n` +
      `Logs: ${join(STATE, 'gateway.log')}, ${join(STATE, 'agent.log')} (one line per job)   Ctrl-C stops everything.\n${line}\n`,
  );
}

process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));
main().catch((e) => {
  process.stderr.write(`[gatehouse] start failed: ${e instanceof Error ? e.message : String(e)}\n`);
  stopAll(1);
});
