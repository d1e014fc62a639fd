/**
 * `npm start`: the whole thing locally — gateway (wrangler dev, local D1/R2 under .gatehouse/)
 * plus one executor agent with the strongest sandbox this machine has. Prints the MCP URL, a
 * dev client token and a ready-to-paste `claude mcp add` line.
 *
 * On a machine with no sandbox (no current runsc, no bwrap) it installs one first when it runs as
 * root with apt-get (scripts/install-system-deps.sh --sandbox-only); otherwise it prints the command
 * to run and exits 1. `npm start -- --sandbox none` starts without isolation (development only).
 *
 * State that persists between runs: .gatehouse/state (D1 sqlite, R2 files, DO storage),
 * .gatehouse/signing-key.json and .gatehouse/secrets-key (generated on first start, never committed), .gatehouse/workspace.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { userInfo } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { generateSigningKey, mintToken } from '../src/auth/mint.ts';
import { BOOTSTRAP_MINTER } from '../src/auth/minter.ts';
import type { AgentGrant } from '../src/contracts/agent-grant.ts';
import { MIN_RUNSC_DATE, runscBuildDate } from '../executor/sandbox/gvisor.ts';

const ROOT = resolve(import.meta.dirname, '..');
// GATEHOUSE_STATE_DIR lets tests (and a second local instance) keep their own state.
const STATE = resolve(process.env.GATEHOUSE_STATE_DIR ?? join(ROOT, '.gatehouse'));
const PORT = Number(process.env.PORT ?? 8787);
const HOST = '127.0.0.1';
const URL_BASE = `http://${HOST}:${PORT}`;
const TEAM = process.env.GATEHOUSE_TEAM ?? 'dev';
/** The local agent's id, fixed so its token's grant can name it. */
const LOCAL_AGENT_ID = 'local-agent';
const SIGN_IN_VARS = ['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'CF_ACCESS_TEAM_DOMAIN', 'CF_ACCESS_AUD'];
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
// Another wrangler configuration for this instance (the bench's raises the rate limits); default wrangler.toml.
const CONFIG_ARGS = process.env.GATEHOUSE_WRANGLER_CONFIG ? ['--config', resolve(process.env.GATEHOUSE_WRANGLER_CONFIG)] : [];
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

/** The dev key that seals team secrets (docs/credentials.md): generated on first start, kept like the signing key. */
function secretsKey(): string {
  const file = join(STATE, 'secrets-key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const key = randomBytes(32).toString('base64');
  writeFileSync(file, key + '\n', { mode: 0o600 });
  log(`generated a dev secrets key: ${file}`);
  return key;
}

async function waitHealthy(deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    try {
      if ((await fetch(`${URL_BASE}/healthz`)).ok) return;
    } catch {
      /* not up yet */
    }
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

const SANDBOXES = ['gvisor', 'bwrap', 'none'];
/** The sandbox asked for: `npm start -- --sandbox <kind>` or GATEHOUSE_SANDBOX; undefined: the strongest there is. */
function sandboxAsked(argv: string[]): string | undefined {
  let asked = process.env.GATEHOUSE_SANDBOX || undefined;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s);
    if (flag !== '--sandbox')
      throw new Error(`unknown argument "${argv[i]}"; npm start takes only --sandbox ${SANDBOXES.join('|')} (after --: npm start -- --sandbox none)`);
    asked = inline ?? argv[++i];
  }
  if (asked !== undefined && !SANDBOXES.includes(asked)) throw new Error(`unknown sandbox "${asked}"; allowed: ${SANDBOXES.join(', ')}`);
  return asked;
}

// Where the agent looks: runsc on this PATH (executor/sandbox/gvisor.ts), bwrap at /usr/bin/bwrap (bwrap.ts).
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const BWRAP = '/usr/bin/bwrap';

/** Why the agent would find no sandbox here, one reason per sandbox; empty when it would find one. */
function sandboxMissing(): string[] {
  const runsc = spawnSync('runsc', ['--version'], { env: { PATH: SYSTEM_PATH }, encoding: 'utf8', timeout: 10_000 });
  const date = runsc.status === 0 ? runscBuildDate(runsc.stdout) : null;
  if (runsc.status === 0 && (date === null || date >= MIN_RUNSC_DATE)) return [];
  if (spawnSync(BWRAP, ['--version'], { stdio: 'ignore', timeout: 10_000 }).status === 0) return [];
  return [
    runsc.status === 0 ? `runsc ${date} is older than ${MIN_RUNSC_DATE} (it fails \`ls -l\` in the sandbox)` : '`runsc` (gVisor) is not installed',
    '`bwrap` (bubblewrap) is not installed',
  ];
}

function onPath(cmd: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((d) => {
    try {
      accessSync(join(d, cmd), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * A sandbox for the agent: there already, or installed now (root with apt-get; the installer's own
 * progress lines show), or an error that says the command to run.
 */
async function ensureSandbox(asked: string | undefined): Promise<void> {
  if (asked === 'none') return;
  const missing = sandboxMissing();
  if (missing.length === 0) return;
  const none = 'or start without isolation (development only): npm start -- --sandbox none';
  const what = `no sandbox on this machine: ${missing.join('; ')}`;
  if (!onPath('apt-get')) {
    throw new Error(
      `${what}, and there is no apt-get to install one with.\n` +
        `  Install bubblewrap (bwrap) or gVisor (runsc: https://gvisor.dev/docs/user_guide/install/) with this system's package manager, then run npm start again;\n  ${none}`,
    );
  }
  if (process.getuid?.() !== 0) {
    throw new Error(
      `${what}. npm start installs one when it runs as root; as ${userInfo().username}, run:\n` +
        `  sudo apt-get install -y --no-install-recommends bubblewrap && npm start\n  ${none}`,
    );
  }
  const installer = ['scripts/install-system-deps.sh', '--sandbox-only'];
  log(`${what}; installing one with apt-get (bash ${installer.join(' ')}: bubblewrap and gVisor's runsc)…`);
  const code = await new Promise<number | null>((res) => {
    const p = spawn('bash', installer, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    p.on('error', () => res(null));
    p.on('exit', (c) => res(c));
  });
  const still = sandboxMissing();
  if (still.length) throw new Error(`bash ${installer.join(' ')} exited with ${code} and left no sandbox (${still.join('; ')});\n  ${none}`);
  if (code !== 0) log(`bash ${installer.join(' ')} exited with ${code}; starting with the sandbox it did install`);
}

/**
 * Records the tokens npm start mints in the gateway's D1, as the admin API does for the tokens it mints: the
 * dashboard's Tokens page lists them and `gatehouse token revoke` finds them. Runs before the gateway starts.
 */
async function recordTokens(
  tokens: Array<[subject: string, scopes: string[], minted: { jti: string; expiresAt: number; kid: string | null }, agentGrant?: AgentGrant]>,
): Promise<void> {
  const now = Date.now();
  const q = (s: string) => `'${s.replace(/'/g, "''")}'`;
  const sql = [
    `INSERT OR IGNORE INTO teams (id, created_at) VALUES (${q(TEAM)}, ${now});`,
    ...tokens.map(
      ([subject, scopes, m, grant]) =>
        `INSERT OR IGNORE INTO tokens (jti, team, subject, scopes, created_at, expires_at, revoked_at, note, agent_grant, minted_by, signing_kid) VALUES ` +
        `(${q(m.jti)}, ${q(TEAM)}, ${q(subject)}, ${q(scopes.join(' '))}, ${now}, ${m.expiresAt * 1000}, NULL, 'minted by npm start', ` +
        `${grant ? q(JSON.stringify(grant)) : 'NULL'}, 'bootstrap', ${m.kid ? q(m.kid) : 'NULL'});`,
    ),
  ].join('\n');
  const file = join(STATE, 'tokens.sql');
  writeFileSync(file, sql + '\n', { mode: 0o600 });
  await run(WRANGLER, ['d1', 'execute', 'DB', ...CONFIG_ARGS, '--local', '--persist-to', join(STATE, 'state'), '--file', file], 'tokens.log');
}

/**
 * Stops the gateway and the agent, each in its own process group (wrangler's workerd, the agent's sandboxes): SIGTERM,
 * then SIGKILL to what is left after a grace, and exits once they are gone, so a Ctrl-C or a `kill -INT` of npm leaves
 * nothing running. (npm passes SIGINT and SIGTERM on to this process: the start script `exec`s node, no shell between.)
 */
let stopping = false;
function stopAll(code: number): void {
  if (stopping) return;
  stopping = true;
  const alive = children.filter((c) => c.pid && c.exitCode === null && c.signalCode === null);
  const signal = (sig: NodeJS.Signals) => {
    for (const c of alive) {
      try {
        process.kill(-c.pid!, sig);
      } catch {
        /* already gone */
      }
    }
  };
  signal('SIGTERM');
  const kill = setTimeout(() => signal('SIGKILL'), 8000);
  kill.unref();
  // Each child's group ends with it (workerd, sandboxes): exit once every one has exited.
  void Promise.all(alive.map((c) => new Promise((res) => (c.exitCode !== null || c.signalCode !== null ? res(null) : c.once('exit', res))))).then(() => {
    signal('SIGKILL'); // stragglers of a group whose leader is gone
    process.exit(code);
  });
  setTimeout(() => process.exit(code), 12_000).unref();
}

async function main(): Promise<void> {
  const sandbox = sandboxAsked(process.argv.slice(2));
  await ensureSandbox(sandbox);
  mkdirSync(join(STATE, 'state'), { recursive: true });
  mkdirSync(join(STATE, 'workspace'), { recursive: true });
  const key = await signingKey();
  const issuer = URL_BASE;
  const audience = `${URL_BASE}/mcp`;
  // The secret and the URLs tokens are minted for; regenerated each start (the port may change).
  const envFile = join(STATE, 'dev.vars');
  // People's sign-in (docs/members.md) is off unless these are set in the environment of npm start.
  const signIn = SIGN_IN_VARS.filter((k) => process.env[k]);
  for (const k of signIn) {
    if (/['\n]/.test(process.env[k]!)) throw new Error(`${k} contains a quote or a line break, which .dev.vars cannot carry`);
  }
  writeFileSync(
    envFile,
    `GATEHOUSE_SIGNING_KEY='${key}'\nGATEHOUSE_SECRETS_KEY='${secretsKey()}'\nGATEHOUSE_ISSUER='${issuer}'\nGATEHOUSE_AUDIENCE='${audience}'\n` +
      signIn.map((k) => `${k}='${process.env[k]}'\n`).join(''),
    { mode: 0o600 },
  );

  log('applying D1 migrations (local)…');
  await run(WRANGLER, ['d1', 'migrations', 'apply', 'DB', ...CONFIG_ARGS, '--local', '--persist-to', join(STATE, 'state')], 'migrations.log');

  const ttlSeconds = 30 * 24 * 3600;
  const mint = (subject: string, scopes: string[], agentGrant?: AgentGrant) =>
    mintToken({ privateJwk: key, issuer, audience, team: TEAM, subject, scopes, ttlSeconds, agentGrant, minter: BOOTSTRAP_MINTER });
  const client = await mint('dev-client', ['execute', 'artifacts:read']);
  const admin = await mint('dev-admin', ['admin']);
  // Like any agent token, the local agent's says what its agent may claim: its id and the sandbox it may start with.
  const agentGrant: AgentGrant = {
    sandboxes: sandbox ? [sandbox as AgentGrant['sandboxes'][number]] : ['gvisor', 'bwrap'],
    labels: [],
    agentId: LOCAL_AGENT_ID,
  };
  const agent = await mint('dev-agent', ['agent'], agentGrant);
  writeFileSync(join(STATE, 'tokens.json'), JSON.stringify({ team: TEAM, client: client.token, admin: admin.token, agent: agent.token }, null, 2) + '\n', {
    mode: 0o600,
  });
  await recordTokens([
    ['dev-client', ['execute', 'artifacts:read'], client],
    ['dev-admin', ['admin'], admin],
    ['dev-agent', ['agent'], agent, agentGrant],
  ]);

  log(`starting the gateway on ${URL_BASE} (wrangler dev; log: ${join(STATE, 'gateway.log')})…`);
  const gwLog = logFile('gateway.log');
  const gw = spawn(
    WRANGLER,
    [
      'dev',
      ...CONFIG_ARGS,
      '--ip',
      HOST,
      '--port',
      String(PORT),
      '--persist-to',
      join(STATE, 'state'),
      '--env-file',
      envFile,
      '--show-interactive-dev-session=false',
      '--log-level',
      'warn',
      ...(process.env.GATEHOUSE_INSPECTOR_PORT ? ['--inspector-port', process.env.GATEHOUSE_INSPECTOR_PORT] : []),
    ],
    { cwd: ROOT, detached: true, stdio: ['ignore', gwLog, gwLog], env: CHILD_ENV },
  );
  children.push(gw);
  gw.on('exit', (code) => {
    if (stopping) return;
    log(`the gateway exited (${code}); the end of ${join(STATE, 'gateway.log')}:\n${tail('gateway.log')}`);
    stopAll(code ?? 1);
  });
  await waitHealthy(90_000);

  log(`starting one executor agent (strongest sandbox available; log: ${join(STATE, 'agent.log')})…`);
  // The token goes in a file only we can read, never on the command line (ps shows argv to every local user).
  const tokenFile = join(STATE, 'agent.token');
  writeFileSync(tokenFile, agent.token + '\n', { mode: 0o600 });
  chmodSync(tokenFile, 0o600);
  // The agent runs as it is installed: bundled (from its TypeScript sources it idles ~40 MB higher, the sources and
  // the type stripper; bench/RESULTS.md). The bundle goes in the state dir, rebuilt at each start from the sources.
  const bundle = join(STATE, 'agent-bundle');
  const built = spawnSync(NODE, [join(ROOT, 'scripts/build-dist.ts'), '--agent-only', '--outdir', bundle], { cwd: ROOT, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`bundling the agent failed (node scripts/build-dist.ts): ${built.stderr || built.error?.message}`);
  const agentArgs = [join(bundle, 'agent.mjs'), '--url', URL_BASE, '--token-file', tokenFile, '--root', join(STATE, 'workspace'), '--id', LOCAL_AGENT_ID];
  if (sandbox) agentArgs.push('--sandbox', sandbox);
  // Asking for no isolation by name is the explicit development choice the agent wants.
  if (sandbox === 'none') agentArgs.push('--allow-no-isolation');
  const agentLog = logFile('agent.log');
  const ag = spawn(NODE, agentArgs, { cwd: ROOT, detached: true, stdio: ['ignore', agentLog, agentLog] });
  children.push(ag);
  ag.on('exit', (code) => {
    if (stopping) return;
    log(
      `the executor agent exited (${code}); the end of ${join(STATE, 'agent.log')}:\n${tail('agent.log')}\nrestart it with: npx gatehouse agent ${agentArgs.slice(1).join(' ')}`,
    );
  });
  const running = await agentConnected(ag, 60_000);

  const line = '─'.repeat(72);
  process.stdout.write(
    `\n${line}\n` +
      `Gatehouse is running (team "${TEAM}"; agent local-agent, sandbox: ${running})\n\n` +
      `MCP URL:          ${audience}\n` +
      `dev client token: ${client.token}\n\n` +
      `Claude Code:\n  claude mcp add --transport http gatehouse ${audience} --header "Authorization: Bearer ${client.token}"\n\n` +
      `Admin CLI (policy, tokens, audit):\n  export GATEHOUSE_URL=${URL_BASE} GATEHOUSE_ADMIN_TOKEN=${admin.token}\n  npx gatehouse policy get\n\n` +
      `Dashboard:        ${URL_BASE}/dashboard (sign in with the admin token)\n` +
      (process.env.OIDC_ISSUER
        ? `People sign in:   with ${process.env.OIDC_ISSUER} (invite them: npx gatehouse members invite <email> --role owner)\n`
        : process.env.CF_ACCESS_TEAM_DOMAIN
          ? `People sign in:   through Cloudflare Access ${process.env.CF_ACCESS_TEAM_DOMAIN}\n`
          : `People sign in:   off; set OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET for npm start to turn it on (docs/members.md)\n`) +
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
