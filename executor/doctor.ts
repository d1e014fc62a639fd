/**
 * `gatehouse agent doctor`: checks an agent host before (or instead of) running the agent, one
 * verdict per check — sandbox tool present (runsc and its version), a test sandbox starts, which
 * runtimes a job inside it can see, the gateway reachable, the token valid for this gateway and
 * not expiring soon, the clock close to the gateway's. Exit 0 when nothing failed, 1 otherwise.
 */
import { DEFAULT_RESOURCE_LIMITS } from '../src/contracts/resource-limits.ts';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, UsageError, type FlagSpecs } from '../cli/args.ts';
import { decodeJwt } from 'jose';
import { probeRuntimes } from './runtimes/probe.ts';
import { startDriver, startStrongestDriver, type SandboxDriver } from './sandbox/index.ts';
import { runQuiet } from './sandbox/exec-util.ts';
import { silentLogger } from './log.ts';
import { forwarderAvailable } from './egress/sandbox-side.ts';
import type { SandboxKind } from '../src/contracts/agent-protocol.ts';

export type Verdict = 'ok' | 'warn' | 'fail' | 'skip';
export interface Check {
  name: string;
  verdict: Verdict;
  detail: string;
}

/** A token that expires sooner than this gets a warning: time to mint the next one. */
const TOKEN_EXPIRY_WARN_SECONDS = 7 * 86400;
/** Clock skew thresholds (the gateway's Date header has one-second resolution). */
const SKEW_WARN_MS = 30_000;
const SKEW_FAIL_MS = 5 * 60_000;

const DOCTOR_USAGE = `gatehouse agent doctor — check this host before running an agent

usage: gatehouse agent doctor --url URL --token-file FILE [--sandbox gvisor|bwrap|none] [--json]
       (the token may also come from GATEHOUSE_AGENT_TOKEN; never from the command line, where ps shows it)

  --url URL          gateway base URL                      (env GATEHOUSE_URL)
  --token-file FILE  read the agent token from FILE        (env GATEHOUSE_AGENT_TOKEN_FILE)
  --sandbox KIND     check this sandbox (default: the strongest that works, as the agent picks)
  --json             print the checks as JSON
  --help             this text

Checks: sandbox tool and version, a test sandbox starts, runtimes visible inside it, gateway
reachable, token valid for this gateway and not expiring within 7 days, clock skew.
Exit 0 when no check failed, 1 when one did, 2 on bad flags.
`;

const DOCTOR_FLAGS: FlagSpecs = {
  url: { type: 'string', value: 'URL', help: 'gateway base URL' },
  'token-file': { type: 'string', value: 'FILE', help: 'read the agent token from FILE' },
  sandbox: { type: 'string', value: 'KIND', help: 'gvisor | bwrap | none' },
};

export interface DoctorOptions {
  url?: string;
  token?: string;
  sandbox?: SandboxKind;
  now?: () => number;
}

async function runDoctor(o: DoctorOptions): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (name: string, verdict: Verdict, detail: string) => void checks.push({ name, verdict, detail });
  checks.push(...(await sandboxChecks(o.sandbox)));
  if (!o.url) {
    add('gateway', 'fail', 'no gateway URL: pass --url or set GATEHOUSE_URL');
    return checks;
  }
  checks.push(...(await gatewayChecks(o.url.replace(/\/+$/, ''), o.token, o.now ?? Date.now)));
  return checks;
}

async function toolVersion(cmd: string): Promise<string | null> {
  const r = await runQuiet(cmd, ['--version'], { timeoutMs: 10_000 });
  if (r.code !== 0) return null;
  return (r.stdout.trim() || r.stderr.trim()).split('\n')[0]?.trim() ?? '';
}

async function sandboxChecks(kind: SandboxKind | undefined): Promise<Check[]> {
  const checks: Check[] = [];
  const runsc = await toolVersion('runsc').catch(() => null);
  checks.push(
    runsc !== null
      ? { name: 'runsc', verdict: 'ok', detail: runsc || 'installed' }
      : {
          name: 'runsc',
          verdict: kind === 'gvisor' ? 'fail' : 'warn',
          detail: 'runsc (gVisor) is not installed: jobs get bubblewrap at best (Debian package runsc)',
        },
  );
  const bwrap = await toolVersion('bwrap').catch(() => null);
  if (runsc === null || kind === 'bwrap') {
    checks.push(
      bwrap !== null
        ? { name: 'bwrap', verdict: 'ok', detail: bwrap || 'installed' }
        : { name: 'bwrap', verdict: 'fail', detail: 'bubblewrap is not installed either (Debian package bubblewrap)' },
    );
  }

  const root = mkdtempSync(join(tmpdir(), 'gatehouse-doctor-ws-'));
  const stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-doctor-state-'));
  let driver: SandboxDriver | null = null;
  try {
    const opts = { root, stateDir, warm: 0 };
    const d = kind ? await startDriver(kind, opts, silentLogger) : await startStrongestDriver(opts, silentLogger);
    if (!d.ok) {
      checks.push({ name: 'sandbox', verdict: 'fail', detail: d.error.message });
      return checks;
    }
    driver = d.value;
    const runtimes = await probeRuntimes();
    const paths = runtimes.list.map((r) => r.path);
    // One shell inside a real sandbox: proves it starts and lists which toolchains a job can see.
    const script = `echo gatehouse-doctor-ok\nfor p in ${paths.map(shellQuote).join(' ')}; do [ -x "$p" ] && echo "visible $p"; done\nexit 0\n`;
    const sb = await driver.acquire('doctor', DEFAULT_RESOURCE_LIMITS);
    try {
      const proc = sb.launch({ script });
      proc.child.stdin?.end();
      let out = '';
      let err = '';
      proc.child.stdout?.on('data', (b: Buffer) => (out += b));
      proc.child.stderr?.on('data', (b: Buffer) => (err += b));
      const timer = setTimeout(() => void sb.kill(0), 60_000);
      const end = await proc.ended;
      clearTimeout(timer);
      // Let the pipes drain after the process is gone.
      await new Promise((r) => setTimeout(r, 50));
      if (!out.includes('gatehouse-doctor-ok')) {
        checks.push({
          name: 'sandbox',
          verdict: 'fail',
          detail: `${driver.describe()}: a test job did not run (${JSON.stringify(end)}): ${err.trim().slice(0, 300) || 'no output'}`,
        });
        return checks;
      }
      checks.push({
        name: 'sandbox',
        verdict: driver.kind === 'none' ? 'warn' : 'ok',
        detail: `${driver.describe()}: a test job ran${driver.kind === 'none' ? ' (no isolation: development only)' : ''}`,
      });
      const visible = new Set([...out.matchAll(/^visible (.+)$/gm)].map((m) => m[1]));
      const seen = runtimes.list.filter((r) => visible.has(r.path));
      const hidden = runtimes.list.filter((r) => !visible.has(r.path));
      checks.push({
        name: 'runtimes',
        verdict: seen.length === 0 ? 'fail' : hidden.length ? 'warn' : 'ok',
        detail:
          `${seen.length} visible inside the sandbox: ${seen.map((r) => r.name).join(', ') || 'none'}` +
          (hidden.length ? `; on the host but not inside: ${hidden.map((r) => r.path).join(', ')}` : ''),
      });
      checks.push(egressCheck(driver));
    } finally {
      await sb.destroy();
    }
  } catch (e) {
    checks.push({ name: 'sandbox', verdict: 'fail', detail: `the test sandbox failed: ${(e as Error).message}` });
  } finally {
    await driver?.close().catch(() => {});
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  }
  return checks;
}

/** Whether jobs a policy gives network access can run here (docs/network.md); the runner refuses them otherwise. */
function egressCheck(driver: SandboxDriver): Check {
  if (!driver.enforcesEgress) {
    return {
      name: 'egress',
      verdict: 'warn',
      detail: `jobs with network access are refused: ${driver.kind} cannot confine a job's network (use gvisor or bwrap)`,
    };
  }
  if (!forwarderAvailable()) {
    return {
      name: 'egress',
      verdict: 'warn',
      detail: "jobs with network access are refused: the sandbox's proxy forwarder needs /usr/bin/python3 (Debian package python3-minimal)",
    };
  }
  return { name: 'egress', verdict: 'ok', detail: "jobs with network access reach the agent's egress proxy and nothing else" };
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export async function gatewayChecks(url: string, token: string | undefined, now: () => number): Promise<Check[]> {
  const checks: Check[] = [];
  const sent = now();
  let health: Response;
  try {
    health = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    checks.push({ name: 'gateway', verdict: 'fail', detail: `cannot reach ${url}: ${cause?.code ?? cause?.message ?? (e as Error).message}` });
    return checks;
  }
  const received = now();
  checks.push(
    health.ok
      ? { name: 'gateway', verdict: 'ok', detail: `${url} answers (${received - sent} ms)` }
      : { name: 'gateway', verdict: 'fail', detail: `${url}/healthz answered HTTP ${health.status}: is this a Gatehouse gateway?` },
  );

  // The gateway's clock: /healthz says `time` (ms); else the Date header (one-second resolution).
  let gatewayMs: number | null = null;
  let resolution = 0;
  try {
    const t = ((await health.clone().json()) as { time?: unknown }).time;
    if (typeof t === 'number' && Number.isFinite(t)) gatewayMs = t;
  } catch {
    /* not JSON */
  }
  const date = health.headers.get('Date');
  if (gatewayMs === null && date && Number.isFinite(Date.parse(date))) {
    gatewayMs = Date.parse(date) + 500;
    resolution = 1000;
  }
  if (gatewayMs !== null) {
    // Compare with the middle of the round trip; allow the round trip and the header's resolution.
    const skew = gatewayMs - (sent + received) / 2;
    const abs = Math.max(0, Math.abs(skew) - resolution - (received - sent) / 2);
    const text = `this host's clock is ${(Math.abs(skew) / 1000).toFixed(1)} s ${skew > 0 ? 'behind' : 'ahead of'} the gateway`;
    checks.push({
      name: 'clock',
      verdict: abs > SKEW_FAIL_MS ? 'fail' : abs > SKEW_WARN_MS ? 'warn' : 'ok',
      detail: abs > SKEW_WARN_MS ? `${text}: sync it (NTP)` : `${text} (within ${SKEW_WARN_MS / 1000} s)`,
    });
  } else {
    checks.push({ name: 'clock', verdict: 'skip', detail: 'the gateway told no time (no Date header)' });
  }

  if (!token) {
    checks.push({
      name: 'token',
      verdict: 'fail',
      detail: 'no agent token: --token-file FILE, GATEHOUSE_AGENT_TOKEN_FILE or GATEHOUSE_AGENT_TOKEN (never on the command line)',
    });
    return checks;
  }
  let claims: { exp?: number; scope?: unknown; team?: unknown; sub?: string };
  try {
    claims = decodeJwt(token) as typeof claims;
  } catch {
    checks.push({ name: 'token', verdict: 'fail', detail: 'the agent token is not a JWT' });
    return checks;
  }
  // The gateway decides: the agent endpoint answers 426 (wants a WebSocket) only after the token passed.
  let answer: Response;
  try {
    answer = await fetch(`${url}/agent/v1/connect`, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
  } catch (e) {
    checks.push({ name: 'token', verdict: 'fail', detail: `cannot ask the gateway about the token: ${(e as Error).message}` });
    return checks;
  }
  if (answer.status === 426) {
    const left = claims.exp === undefined ? Infinity : claims.exp - Math.floor(now() / 1000);
    const who = `team ${String(claims.team)}, subject ${claims.sub ?? '-'}`;
    if (left < TOKEN_EXPIRY_WARN_SECONDS) {
      checks.push({
        name: 'token',
        verdict: 'warn',
        detail: `accepted by the gateway (${who}) but expires in ${formatSeconds(left)}: mint a new one (gatehouse token create --scope agent)`,
      });
    } else {
      checks.push({
        name: 'token',
        verdict: 'ok',
        detail: `accepted by the gateway (${who}); expires in ${left === Infinity ? 'never' : formatSeconds(left)}`,
      });
    }
  } else {
    let message = `HTTP ${answer.status}`;
    try {
      const body = (await answer.json()) as { error?: { code?: string; message?: string } };
      if (body.error) message = `${body.error.code}: ${body.error.message}`;
    } catch {
      /* not JSON */
    }
    checks.push({ name: 'token', verdict: 'fail', detail: `refused by the gateway: ${message}` });
  }
  return checks;
}

function formatSeconds(s: number): string {
  if (s <= 0) return '0 s (expired)';
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 2 * 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} days`;
}

function formatChecks(checks: Check[]): string {
  const w = Math.max(...checks.map((c) => c.name.length));
  const label: Record<Verdict, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' };
  const lines = checks.map((c) => `${label[c.verdict]}  ${c.name.padEnd(w)}  ${c.detail}`);
  const failed = checks.filter((c) => c.verdict === 'fail').length;
  const warned = checks.filter((c) => c.verdict === 'warn').length;
  lines.push(
    '',
    failed
      ? `${failed} check(s) failed: fix them before running the agent`
      : warned
        ? `ready, with ${warned} warning(s)`
        : 'ready: gatehouse agent can run here',
  );
  return lines.join('\n');
}

/** `gatehouse agent doctor …`: resolves with the exit code. */
export async function runDoctorCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv.some((a) => a === '--token' || a.startsWith('--token='))) {
    process.stderr.write(
      'error: the agent token is not taken on the command line (every local user can read it with ps): use --token-file FILE or GATEHOUSE_AGENT_TOKEN\n',
    );
    return 2;
  }
  let v: { url?: string; 'token-file'?: string; sandbox?: string; json?: boolean; help?: boolean };
  try {
    const a = parseArgs(argv, DOCTOR_FLAGS, 'agent doctor', false);
    const extra = [...a.positionals, ...a.rest];
    if (extra.length) throw new UsageError(`agent doctor takes no arguments (got "${extra.join(' ')}")`);
    v = a.flags as typeof v;
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`error: ${e.message}\n\n${DOCTOR_USAGE}`);
    return 2;
  }
  if (v.help) return (process.stdout.write(DOCTOR_USAGE), 0);
  if (v.sandbox !== undefined && !['gvisor', 'bwrap', 'none'].includes(v.sandbox)) {
    process.stderr.write(`error: --sandbox must be one of gvisor, bwrap, none; got "${v.sandbox}"\n`);
    return 2;
  }
  let token = env.GATEHOUSE_AGENT_TOKEN;
  const tokenFile = v['token-file'] ?? (token ? undefined : env.GATEHOUSE_AGENT_TOKEN_FILE);
  if (tokenFile) {
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch (e) {
      process.stderr.write(`error: cannot read --token-file ${tokenFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
      return 2;
    }
  }
  const checks = await runDoctor({ url: v.url ?? env.GATEHOUSE_URL, token, sandbox: v.sandbox as SandboxKind | undefined });
  process.stdout.write(v.json ? `${JSON.stringify({ ok: !checks.some((c) => c.verdict === 'fail'), checks }, null, 2)}\n` : `${formatChecks(checks)}\n`);
  return checks.some((c) => c.verdict === 'fail') ? 1 : 0;
}
