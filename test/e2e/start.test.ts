/**
 * The quick start: `npm start` (scripts/start.ts), run as the README says, on a fresh state dir brings up the gateway and
 * one agent, prints the MCP URL, a dev token and a `claude mcp add` line — quietly, banner last —
 * and the official SDK client can list tools and run a job with that token. State (signing key,
 * D1) survives a restart. First contact: `/` explains itself, a near-miss MCP path gets a hint.
 *
 * A fresh machine — no runsc, no bwrap (a private mount namespace hides them, test/support/bare-machine.ts):
 * as root with apt-get, npm start installs the sandbox packages (only those; apt-get is a stand-in that
 * records its calls and puts the machine's own bwrap and runsc back) and reaches a job run by the SDK
 * client; not root, or without apt-get, it prints the exact command to run and exits 1, and the
 * `--sandbox none` it offers starts as written.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectMcp, freePort, ROOT, stopGroup } from './harness.ts';
import { alive, descendants } from '../support/process-tree.ts';
import { until } from '../support/until.ts';
import { readmeBlock } from '../cli/readme.ts';
import { BARE_MACHINE_SUPPORTED, bareMachineDir, removeBareMachineDir, spawnOnBareMachine, type BareMachine } from '../support/bare-machine.ts';

const state = mkdtempSync(join(tmpdir(), 'gatehouse-start-'));
let proc: ChildProcess | null = null;

async function start(port: number): Promise<{ out: () => string; token: string }> {
  // `npm start` as the README says (npm runs scripts/start.ts on the pinned Node 22 of node_modules/.bin).
  const [quickStart] = readmeBlock('quick-start');
  expect(quickStart).toBe('npm install && npm start');
  proc = spawn('npm', ['start'], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PORT: String(port), GATEHOUSE_STATE_DIR: state, GATEHOUSE_INSPECTOR_PORT: String(await freePort()) },
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const until = Date.now() + 120_000;
  // The banner comes only once the agent has connected.
  while (!/dev client token: (\S+)[\s\S]*Ctrl-C stops everything\.\n─+\n/.test(out)) {
    if (proc.exitCode !== null) throw new Error(`npm start exited:\n${out}`);
    if (Date.now() > until) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { out: () => out, token: /dev client token: (\S+)/.exec(out)![1] };
}

afterAll(async () => {
  if (proc) await stopGroup(proc, 8000);
  rmSync(state, { recursive: true, force: true });
});

/** Waits for npm start's banner (it comes only once the agent has connected); throws with the output if it exits first. */
async function banner(p: ChildProcess, out: () => string): Promise<{ token: string }> {
  const until = Date.now() + 180_000;
  while (!/dev client token: (\S+)[\s\S]*Ctrl-C stops everything\.\n─+\n/.test(out())) {
    if (p.exitCode !== null) throw new Error(`npm start exited (${p.exitCode}):\n${out()}`);
    if (Date.now() > until) throw new Error(`npm start did not come up:\n${out()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { token: /dev client token: (\S+)/.exec(out())![1] };
}

describe('npm start', () => {
  it('starts gateway + agent, prints a working MCP URL, token and claude line; state survives a restart', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/mcp`;
    const first = await start(port);
    expect(first.out()).toContain(`MCP URL:          ${url}`);
    expect(first.out()).toContain(`claude mcp add --transport http gatehouse ${url} --header "Authorization: Bearer ${first.token}"`);
    expect(first.out()).toMatch(/agent local-agent, sandbox: (gvisor|bwrap)\)/);
    expect(first.out()).toContain(`Dashboard:        http://127.0.0.1:${port}/dashboard`);
    // Without an identity provider it says how to turn people's sign-in on.
    expect(first.out()).toContain('People sign in:   off; set OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET for npm start to turn it on (docs/members.md)');
    // Quiet: a few lines of our own, then the banner, and nothing after it; no wrangler noise, no stack traces
    // (the offline lookup of workers.cloudflare.com for Request.cf is switched off).
    const text = first.out();
    expect(text.trimEnd().endsWith('─'.repeat(72))).toBe(true);
    // npm's own header (`> gatehouse@0.1.0 start`, `> exec node scripts/start.ts`) and warnings about this machine's npm
    // configuration are npm's, not ours.
    const before = text
      .slice(0, text.indexOf('─'.repeat(72)))
      .trim()
      .split('\n')
      .filter((l) => l.trim() && !/^> (gatehouse@\S+ start|exec node scripts\/start\.ts)$/.test(l) && !/^npm warn /.test(l));
    expect(before.length, text).toBeLessThanOrEqual(5);
    expect(
      before.every((l) => l.startsWith('[gatehouse] ')),
      text,
    ).toBe(true);
    expect(text).not.toMatch(/Request\.cf|ENOTFOUND|\n\s+at /);
    // The children's output went to the log files the banner names.
    expect(readFileSync(join(state, 'agent.log'), 'utf8')).toMatch(/connected to /);
    expect(readFileSync(join(state, 'gateway.log'), 'utf8')).not.toMatch(/Request\.cf|ENOTFOUND/);

    const c = await connectMcp(url, first.token);
    const toolNames = (await c.listTools()).tools.map((t) => t.name);
    expect(toolNames).toContain('execute');
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['quick start'] } });
    expect(r.structuredContent).toMatchObject({ stdout: 'quick start\n', exit_code: 0 });
    await c.close();
    // The agent logs one line per job: id, state, duration.
    const jobId = (r.structuredContent as { job_id: string }).job_id;
    expect(readFileSync(join(state, 'agent.log'), 'utf8')).toMatch(new RegExp(`job ${jobId} exited 0 in \\d+ ms`));

    // The tokens npm start minted are the gateway's like any other: the Tokens page (GET /admin/v1/tokens) lists them.
    const minted = JSON.parse(readFileSync(join(state, 'tokens.json'), 'utf8')) as { admin: string };
    const listed = (await (await fetch(`http://127.0.0.1:${port}/admin/v1/tokens`, { headers: { Authorization: `Bearer ${minted.admin}` } })).json()) as {
      tokens: { subject: string; scopes: string[]; note: string; revokedAt: number | null; mintedBy: unknown; agentGrant: unknown }[];
    };
    expect(listed.tokens.map((t) => [t.subject, t.scopes.join(' '), t.note, t.mintedBy]).sort()).toEqual([
      ['dev-admin', 'admin', 'minted by npm start', { kind: 'bootstrap' }],
      ['dev-agent', 'agent', 'minted by npm start', { kind: 'bootstrap' }],
      ['dev-client', 'execute artifacts:read', 'minted by npm start', { kind: 'bootstrap' }],
    ]);
    // The local agent's token grants what it claims and nothing more: its id and the sandboxes npm start may pick.
    expect(listed.tokens.find((t) => t.subject === 'dev-agent')!.agentGrant).toEqual({ sandboxes: ['gvisor', 'bwrap'], labels: [], agentId: 'local-agent' });

    // First contact: the home page says what this is and where /mcp and /dashboard are.
    const home = await fetch(`http://127.0.0.1:${port}/`, { headers: { Accept: 'text/html' } });
    expect(home.status).toBe(200);
    expect(home.headers.get('content-type')).toMatch(/text\/html/);
    expect(home.headers.get('content-security-policy')).toContain("default-src 'none'");
    const page = await home.text();
    expect(page).toContain('governed command execution');
    expect(page).toContain(url);
    expect(page).toContain('/dashboard');
    // …and the links on it lead somewhere.
    expect((await fetch(`http://127.0.0.1:${port}/dashboard`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource`)).status).toBe(200);
    // The icon a browser asks every site for exists.
    for (const icon of ['/favicon.ico', '/favicon.svg']) {
      const f = await fetch(`http://127.0.0.1:${port}${icon}`);
      expect(f.status, icon).toBe(200);
      expect(f.headers.get('content-type'), icon).toBe('image/svg+xml');
      expect(await f.text(), icon).toMatch(/^<svg /);
    }
    // A near-miss MCP path gets the endpoint to use, with or without a token.
    for (const path of ['/mcp/', '/mcp/messages', '/sse']) {
      const miss = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
      expect(miss.status, path).toBe(404);
      const body = (await miss.json()) as { error: { message: string } };
      expect(body.error.message, path).toContain(`Use the MCP endpoint ${url}`);
    }
    const other = await fetch(`http://127.0.0.1:${port}/nothing-here`);
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: { message: string } }).error.message).toContain(`MCP endpoint ${url}`);

    // The README's first example runs in the fresh dev workspace (it is no "failed job" on the Overview).
    const example = /client\.callTool\((\{ name: 'execute', arguments: .*\})\);/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'))?.[1];
    expect(example).toBeDefined();
    const ex = await connectMcp(url, first.token);
    const ran = await ex.callTool(new Function(`return (${example});`)() as { name: string; arguments: Record<string, unknown> });
    await ex.close();
    expect(ran.isError, JSON.stringify(ran.content)).toBeFalsy();
    expect((ran.structuredContent as { exit_code: number }).exit_code).toBe(0);

    // `kill -INT` of npm's own process stops npm start, the gateway (wrangler, workerd) and the agent: nothing is left.
    const tree = descendants(proc!.pid!);
    expect(tree.length).toBeGreaterThan(3);
    const npmExited = new Promise((res) => proc!.once('exit', res));
    process.kill(proc!.pid!, 'SIGINT');
    await npmExited;
    await until(async () => tree.every((pid) => !alive(pid)), 30_000, 'every process npm start ran to end');
    expect(tree.filter(alive)).toEqual([]);
    await stopGroup(proc!, 8000);

    // Second start: same signing key, so the first run's token still works.
    const second = await start(port);
    const again = await connectMcp(url, first.token);
    expect((await again.listTools()).tools.map((t) => t.name)).toEqual(toolNames);
    await again.close();
    expect(second.out()).not.toContain('generated a dev signing key');
  }, 300_000);
});

if (!BARE_MACHINE_SUPPORTED && process.env.CI === 'true') throw new Error('the fresh-machine tests need root, unshare and overlayfs under CI=true');
const HAVE_SANDBOX_TO_RESTORE = existsSync('/usr/bin/bwrap') && existsSync('/usr/bin/runsc');
if (!HAVE_SANDBOX_TO_RESTORE && process.env.CI === 'true')
  throw new Error("the fresh-machine test restores this machine's /usr/bin/bwrap and /usr/bin/runsc; .ci/run installs them");

describe('npm start on a fresh machine (no runsc, no bwrap)', () => {
  const machines: string[] = [];
  const running: ChildProcess[] = [];
  afterAll(async () => {
    for (const p of running) await stopGroup(p, 8000);
    for (const d of machines) removeBareMachineDir(d);
  });

  /** `npm start <args>` in the repository on a bare machine; `user` runs it as that uid (setpriv). */
  async function startBare(m: Omit<BareMachine, 'aptLog'> & { aptGet: boolean }, args: string[] = [], user?: number) {
    const dir = bareMachineDir();
    machines.push(dir);
    const aptDir = join(dir, 'apt');
    mkdirSync(join(aptDir, 'sources.list.d'), { recursive: true });
    mkdirSync(join(aptDir, 'preferences.d'), { recursive: true });
    const home = join(dir, 'home');
    mkdirSync(home);
    const cmd = ['npm', 'start', ...(args.length ? ['--', ...args] : [])];
    if (user !== undefined) {
      chmodSync(dir, 0o755);
      chownSync(home, user, user);
      cmd.unshift('setpriv', `--reuid=${user}`, `--regid=${user}`, '--clear-groups');
    }
    const aptLog = join(dir, 'apt-get.log');
    const port = await freePort();
    const p = spawnOnBareMachine(dir, { hide: m.hide, aptLog: m.aptGet ? aptLog : undefined }, cmd, {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        HOME: home,
        npm_config_cache: join(home, '.npm'),
        PORT: String(port),
        GATEHOUSE_STATE_DIR: join(dir, 'state'),
        GATEHOUSE_INSPECTOR_PORT: String(await freePort()),
        GATEHOUSE_APT_DIR: aptDir,
      },
    });
    running.push(p);
    let out = '';
    p.stdout!.on('data', (d) => (out += d));
    p.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
    const aptCalls = () => (existsSync(aptLog) ? readFileSync(aptLog, 'utf8').trim().split('\n') : []);
    return { p, out: () => out, exited, aptCalls, url: `http://127.0.0.1:${port}/mcp`, state: join(dir, 'state') };
  }

  async function runsAJob(url: string, token: string): Promise<{ sandbox: string }> {
    const c = await connectMcp(url, token);
    const r = await c.callTool({ name: 'execute', arguments: { command: 'echo', args: ['fresh machine'] } });
    await c.close();
    expect(r.structuredContent).toMatchObject({ stdout: 'fresh machine\n', exit_code: 0 });
    return r.structuredContent as { sandbox: string };
  }

  it.skipIf(!BARE_MACHINE_SUPPORTED || !HAVE_SANDBOX_TO_RESTORE)(
    'as root with apt-get: installs bubblewrap and runsc (nothing else), with its progress shown, then a job runs in a real sandbox',
    async () => {
      // ruby stands for the toolchains the full install-system-deps.sh would add: it must not be asked for.
      const s = await startBare({ hide: ['runsc', 'bwrap', 'ruby'], aptGet: true });
      const { token } = await banner(s.p, s.out);
      const text = s.out();
      expect(text).toContain(
        '[gatehouse] no sandbox on this machine: `runsc` (gVisor) is not installed; `bwrap` (bubblewrap) is not installed; installing one with apt-get (bash scripts/install-system-deps.sh --sandbox-only',
      );
      // The installer's own progress lines, before the gateway starts.
      expect(text).toContain('install-system-deps: installing bubblewrap');
      expect(text.indexOf('install-system-deps: installing bubblewrap')).toBeLessThan(text.indexOf('[gatehouse] starting the gateway'));
      const installs = s.aptCalls().filter((c) => c.startsWith('install '));
      expect(installs[0], s.aptCalls().join('\n')).toBe('install -y -qq --no-install-recommends bubblewrap');
      expect(
        installs.flatMap((c) =>
          c
            .split(' ')
            .filter((w) => !w.startsWith('-'))
            .slice(1),
        ),
      ).toEqual(['bubblewrap', 'runsc']);
      expect(text).toMatch(/agent local-agent, sandbox: (gvisor|bwrap)\)/);
      const job = await runsAJob(s.url, token);
      expect(job.sandbox).toMatch(/^(gvisor|bwrap)$/);
      await stopGroup(s.p, 8000);
    },
    300_000,
  );

  it.skipIf(!BARE_MACHINE_SUPPORTED)(
    'not root: says the exact command (sudo apt-get …) and exits 1 without touching apt',
    async () => {
      const s = await startBare({ hide: ['runsc', 'bwrap'], aptGet: true }, [], 65534);
      const code = await s.exited;
      expect(code, s.out()).not.toBe(0);
      expect(s.out()).toContain(
        '[gatehouse] start failed: no sandbox on this machine: `runsc` (gVisor) is not installed; `bwrap` (bubblewrap) is not installed. npm start installs one when it runs as root; as nobody, run:\n  sudo apt-get install -y --no-install-recommends bubblewrap && npm start\n  or start without isolation (development only): npm start -- --sandbox none\n',
      );
      expect(s.aptCalls()).toEqual([]);
      expect(existsSync(s.state)).toBe(false);
    },
    120_000,
  );

  it.skipIf(!BARE_MACHINE_SUPPORTED)(
    'no apt-get: says what to install and offers --sandbox none, which starts as written',
    async () => {
      const s = await startBare({ hide: ['runsc', 'bwrap', 'apt-get'], aptGet: false });
      const code = await s.exited;
      expect(code, s.out()).not.toBe(0);
      expect(s.out()).toContain(
        "there is no apt-get to install one with.\n  Install bubblewrap (bwrap) or gVisor (runsc: https://gvisor.dev/docs/user_guide/install/) with this system's package manager, then run npm start again;\n  or start without isolation (development only): npm start -- --sandbox none\n",
      );

      const none = await startBare({ hide: ['runsc', 'bwrap', 'apt-get'], aptGet: false }, ['--sandbox', 'none']);
      const { token } = await banner(none.p, none.out);
      expect(none.out()).toContain('agent local-agent, sandbox: none)');
      expect((await runsAJob(none.url, token)).sandbox).toBe('none');
      await stopGroup(none.p, 8000);
    },
    300_000,
  );
});
