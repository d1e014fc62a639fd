/**
 * Agent configuration from flags and environment variables, validated in one place.
 * Bad input is a value (`usage` error) the CLI prints with the list of allowed flags.
 */
import { readFileSync } from 'node:fs';
import { parseArgs, UsageError, type FlagSpecs, type Parsed } from '../cli/args.ts';
import { hostname } from 'node:os';
import { delimiter } from 'node:path';
import type { SandboxKind } from '../src/contracts/agent-protocol.ts';
import { testHostsFromEnv, type TestHosts } from './egress/test-hosts.ts';
import { ARTIFACT_PART_BYTES, R2_MULTIPART_MIN_PART_BYTES, REQUEST_BODY_MAX_BYTES } from '../src/contracts/limits.ts';

interface AgentConfig {
  url: string;
  token: string;
  root: string;
  /** null: the strongest available (gvisor, then bwrap). */
  sandbox: SandboxKind | null;
  capacity: number;
  agentId: string;
  warm: number;
  maxTimeoutMs: number;
  maxArtifactBytes: number;
  /** Artifacts above this go to the gateway in parts of this size (R2 multipart; each part one request). */
  /** Set with --artifact-part-bytes; null: one PUT while a stream fits one request, 64 MiB parts above. */
  artifactPartBytes: number | null;
  /** Agent-private state (runsc state, bundles, spool); default derived from root and id. */
  stateDir: string | null;
  /** Placement labels (`--label gpu --label linux-x64`); a job may require some. */
  labels: string[];
  /** `--json`: log one JSON object per line instead of text. */
  json: boolean;
  /** `--metrics-port`: serve /healthz and /metrics on 127.0.0.1 at this port (executor/metrics.ts); null: off. */
  metricsPort: number | null;
  /** Tests only: names the egress proxy sends to 127.0.0.1 (executor/egress/test-hosts.ts); null in production. */
  egressTestHosts?: TestHosts | null;
  /** `--extra-ca FILE` (repeatable) or GATEHOUSE_EXTRA_CA: CA certificates jobs trust besides the host's (sandbox/trusted-cas.ts). */
  extraCaFiles: string[];
}

export const AGENT_USAGE = `gatehouse agent — executor agent: connects out to a Gatehouse gateway and runs its team's jobs in a sandbox

usage: gatehouse agent --url URL --token-file FILE --root DIR [options]
       gatehouse agent doctor --url URL --token-file FILE   (check this host: sandbox, runtimes, gateway, token, clock)
       (the token may also come from the environment, GATEHOUSE_AGENT_TOKEN; never from the command line, where ps shows it)

  --url URL               gateway base URL                      (env GATEHOUSE_URL)
  --token-file FILE       read the agent token (JWT with scope "agent") from FILE (env GATEHOUSE_AGENT_TOKEN_FILE)
  --root DIR              workspace jobs run in; created if missing (env GATEHOUSE_ROOT)
  --sandbox KIND          gvisor | bwrap | none; default: strongest that works (gvisor, then bwrap)
                          (none = no isolation; never chosen implicitly, and only with --allow-no-isolation)
  --allow-no-isolation    let --sandbox none start (development machines only) (env GATEHOUSE_ALLOW_NO_ISOLATION=1)
  --capacity N            jobs run at once (1-256, default 4)
  --id ID                 agent id (default: hostname-pid)
  --warm N                gVisor sandboxes kept pre-started (default: capacity)
  --max-timeout-ms N      this agent's ceiling on job timeouts (default 600000)
  --max-artifact-bytes N  this agent's ceiling on each stream's artifact (default 268435456)
  --artifact-part-bytes N upload artifacts larger than N in parts of N bytes (default: one PUT up to ${REQUEST_BODY_MAX_BYTES},
                          parts of ${ARTIFACT_PART_BYTES} above; ${R2_MULTIPART_MIN_PART_BYTES} to ${REQUEST_BODY_MAX_BYTES}: R2's smallest part to Cloudflare's largest request body)
  --state-dir DIR         agent-private state (default: <tmp>/gatehouse-agent-<hash of root and id>)
  --label LABEL           placement label jobs can require (repeatable, e.g. --label gpu --label linux-x64)
                          (env GATEHOUSE_AGENT_LABELS, comma-separated)
  --extra-ca FILE         PEM CA certificates jobs trust besides this host's CA bundle: a TLS-inspecting proxy's or
                          a private registry's CA (repeatable; env GATEHOUSE_EXTRA_CA, several separated by ${delimiter})
  --metrics-port PORT     serve /healthz and Prometheus /metrics on 127.0.0.1:PORT (1-65535; default: off)
  (tests only: GATEHOUSE_EGRESS_TEST_HOSTS=name=127.0.0.1[:port],… with GATEHOUSE_EGRESS_TEST_MODE=1 sends the egress
   proxy's connections for those names to 127.0.0.1; the agent refuses to start with the first alone)
  --json                  log one JSON object per line (time, level, msg; a job's line adds job, state,
                          exitCode, signal, durationMs) instead of text
  --help                  this text
`;

const LABEL = /^[A-Za-z0-9._:=-]{1,64}$/;
const MAX_LABELS = 32;

/** The agent's flags, for the one argument parser every `gatehouse` command uses (cli/args.ts). */
const FLAGS: FlagSpecs = Object.fromEntries(
  [
    'url',
    'token-file',
    'root',
    'sandbox',
    'capacity',
    'id',
    'warm',
    'max-timeout-ms',
    'max-artifact-bytes',
    'artifact-part-bytes',
    'state-dir',
    'metrics-port',
  ].map((f) => [f, { type: 'string', help: '' }]),
) as FlagSpecs;
FLAGS['allow-no-isolation'] = { type: 'bool', help: '' };
FLAGS.label = { type: 'list', help: '' };
FLAGS['extra-ca'] = { type: 'list', help: '' };

const TOKEN_REFUSED =
  'the agent token is not taken on the command line (every local user can read it with ps); put it in a file readable only by the agent (--token-file FILE) or in the environment (GATEHOUSE_AGENT_TOKEN)';

export type ConfigResult = { ok: true; config: AgentConfig } | { ok: false; help: true } | { ok: false; help: false; message: string };

export function parseAgentArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ConfigResult {
  const bad = (message: string): ConfigResult => ({ ok: false, help: false, message });
  if (argv.some((a) => a === '--token' || a.startsWith('--token='))) return bad(TOKEN_REFUSED);
  let parsed: Parsed;
  try {
    parsed = parseArgs(argv, FLAGS, 'agent', false);
  } catch (e) {
    if (e instanceof UsageError) return bad(e.message);
    throw e;
  }
  if (parsed.flags.help) return { ok: false, help: true };
  const extra = [...parsed.positionals, ...(parsed.sawDoubleDash ? ['--'] : []), ...parsed.rest];
  if (extra.length) return bad(`unknown argument "${extra[0]}"`);
  const v: Record<string, string> = {};
  for (const [k, x] of Object.entries(parsed.flags))
    if (typeof x === 'string') v[k] = x;
    else if (x === true) v[k] = 'true';
  const labels: string[] = [...((parsed.flags.label as string[] | undefined) ?? [])];
  if (labels.length === 0 && env.GATEHOUSE_AGENT_LABELS)
    labels.push(
      ...env.GATEHOUSE_AGENT_LABELS.split(',')
        .map((l) => l.trim())
        .filter(Boolean),
    );
  for (const l of labels) if (!LABEL.test(l)) return bad(`--label must be 1-64 characters of letters, digits, . _ : = -, got "${l}"`);
  if (labels.length > MAX_LABELS) return bad(`at most ${MAX_LABELS} --label flags, got ${labels.length}`);
  const url = v.url ?? env.GATEHOUSE_URL;
  if (!url) return bad('--url is required (or GATEHOUSE_URL)');
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return bad(`--url must be http(s), got "${url}"`);
  } catch {
    return bad(`--url is not a URL: "${url}"`);
  }
  let token = env.GATEHOUSE_AGENT_TOKEN;
  const tokenFile = v['token-file'] ?? env.GATEHOUSE_AGENT_TOKEN_FILE;
  if (tokenFile) {
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch (e) {
      return bad(`cannot read --token-file ${tokenFile}: ${(e as Error).message}`);
    }
  }
  if (!token) return bad('an agent token is required: --token-file FILE, GATEHOUSE_AGENT_TOKEN_FILE or GATEHOUSE_AGENT_TOKEN');
  const root = v.root ?? env.GATEHOUSE_ROOT;
  if (!root) return bad('--root is required (or GATEHOUSE_ROOT)');
  const sandboxRaw = v.sandbox ?? env.GATEHOUSE_SANDBOX;
  if (sandboxRaw !== undefined && !['gvisor', 'bwrap', 'none'].includes(sandboxRaw)) {
    return bad(`--sandbox must be one of gvisor, bwrap, none; got "${sandboxRaw}"`);
  }
  if (sandboxRaw === 'none' && v['allow-no-isolation'] !== 'true' && env.GATEHOUSE_ALLOW_NO_ISOLATION !== '1') {
    return bad(
      '--sandbox none is refused: jobs would run without isolation, as this user, able to read the agent token, its files and environment and everything else this user can, and to reach the network. On a development machine, add --allow-no-isolation (or GATEHOUSE_ALLOW_NO_ISOLATION=1); anywhere else install gVisor (runsc) or bubblewrap',
    );
  }
  const int = (name: string, dflt: number, min: number, max: number): number | string => {
    const raw = v[name];
    if (raw === undefined) return dflt;
    if (!/^\d+$/.test(raw)) return `--${name} must be a whole number, got "${raw}"`;
    const n = Number(raw);
    if (n < min || n > max) return `--${name} must be between ${min} and ${max}, got ${n}`;
    return n;
  };
  const capacity = int('capacity', 4, 1, 256);
  if (typeof capacity === 'string') return bad(capacity);
  const warm = int('warm', capacity, 0, 256);
  if (typeof warm === 'string') return bad(warm);
  const maxTimeoutMs = int('max-timeout-ms', 600_000, 100, 24 * 3600_000);
  if (typeof maxTimeoutMs === 'string') return bad(maxTimeoutMs);
  const maxArtifactBytes = int('max-artifact-bytes', 256 * 1024 * 1024, 0, 2 ** 40);
  if (typeof maxArtifactBytes === 'string') return bad(maxArtifactBytes);
  const artifactPartBytes = int('artifact-part-bytes', ARTIFACT_PART_BYTES, R2_MULTIPART_MIN_PART_BYTES, REQUEST_BODY_MAX_BYTES);
  if (typeof artifactPartBytes === 'string') return bad(artifactPartBytes);
  const partBytesGiven = v['artifact-part-bytes'] !== undefined;
  const metricsPort = v['metrics-port'] === undefined ? null : int('metrics-port', 0, 1, 65535);
  if (typeof metricsPort === 'string') return bad(`${metricsPort} (a TCP port on 127.0.0.1)`);
  const testHosts = testHostsFromEnv(env);
  if (!testHosts.ok) return bad(testHosts.message);
  const extraCaFiles = [...((parsed.flags['extra-ca'] as string[] | undefined) ?? [])];
  if (!extraCaFiles.length && env.GATEHOUSE_EXTRA_CA) extraCaFiles.push(...env.GATEHOUSE_EXTRA_CA.split(delimiter).filter(Boolean));
  const agentId = v.id ?? env.GATEHOUSE_AGENT_ID ?? `${hostname()}-${process.pid}`;
  if (agentId.length < 1 || agentId.length > 128 || !/^[\w.@:-]+$/.test(agentId)) {
    return bad(`--id must be 1-128 characters of letters, digits, . _ - @ :, got "${agentId}"`);
  }
  return {
    ok: true,
    config: {
      url: url.replace(/\/+$/, ''),
      token,
      root,
      sandbox: (sandboxRaw as SandboxKind | undefined) ?? null,
      capacity,
      agentId,
      warm,
      maxTimeoutMs,
      maxArtifactBytes,
      artifactPartBytes: partBytesGiven ? artifactPartBytes : null,
      stateDir: v['state-dir'] ?? null,
      labels: [...new Set(labels)],
      json: v.json === 'true',
      metricsPort,
      egressTestHosts: testHosts.hosts,
      extraCaFiles,
    },
  };
}
