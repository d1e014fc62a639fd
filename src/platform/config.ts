/**
 * The gateway's plain [vars] (wrangler.toml), parsed and checked once per `env` object: a value
 * that is not what the var allows is a `config_error` naming the var and what it allows, answered
 * on every request by the config guard (src/auth/index.ts), never replaced by a silent default.
 * The trust vars (keys, issuers) are parsed by src/auth/config.ts, the plan by ./plan.ts.
 */
import type { Env } from '../env.ts';
import { REQUEST_BODY_MAX_BYTES } from './limits.ts';
import { workersPlan, type WorkersPlan } from './plan.ts';

/** `MAX_BODY_BYTES` unset: the largest /mcp request body read (1 MiB). */
export const DEFAULT_MAX_BODY_BYTES = 1 << 20;
/** `HEARTBEAT_MS` unset: how often agents send a heartbeat; three missed ones and an agent is gone. */
export const DEFAULT_HEARTBEAT_MS = 5000;
const HEARTBEAT_MIN_MS = 100;
const HEARTBEAT_MAX_MS = 60_000;
/** A smaller /mcp body limit would refuse an ordinary tools/call. */
const MAX_BODY_MIN_BYTES = 1024;

interface GatewayConfig {
  maxBodyBytes: number;
  heartbeatMs: number;
  plan: WorkersPlan;
  /** ALLOWED_ORIGINS entries: exact origins (lower case, no trailing slash) and `scheme://*.suffix` wildcards. */
  origins: { exact: string[]; wildcard: [scheme: string, suffix: string][] };
  /** ALLOWED_HOSTS entries (`name[:port]`, lower case). */
  hosts: string[];
}

export type ConfigResult = { ok: true; config: GatewayConfig } | { ok: false; code: 'config_error'; message: string };

type ConfigVars = Pick<
  Env,
  'MAX_BODY_BYTES' | 'HEARTBEAT_MS' | 'GATEHOUSE_WORKERS_PLAN' | 'ALLOWED_ORIGINS' | 'ALLOWED_HOSTS' | 'GATEHOUSE_ISSUER' | 'GATEHOUSE_AUDIENCE'
>;
const parsed = new WeakMap<ConfigVars, ConfigResult>();

/** The gateway's vars, parsed once per `env` object. */
export function gatewayConfig(env: ConfigVars): ConfigResult {
  let r = parsed.get(env);
  if (!r) {
    r = parseConfig(env);
    parsed.set(env, r);
  }
  return r;
}

const fail = (message: string): ConfigResult => ({ ok: false, code: 'config_error', message: `${message}; set it in wrangler.toml [vars]` });
const list = (value: string | undefined) =>
  (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function wholeNumber(name: string, value: string | undefined, fallback: number, min: number, max: number): number | string {
  const raw = (value ?? '').trim();
  if (raw === '') return fallback;
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (Number.isSafeInteger(n) && n >= min && n <= max) return n;
  return `${name} is "${value}"; allowed: a whole number from ${min} to ${max}`;
}

function parseConfig(env: ConfigVars): ConfigResult {
  const maxBodyBytes = wholeNumber('MAX_BODY_BYTES', env.MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES, MAX_BODY_MIN_BYTES, REQUEST_BODY_MAX_BYTES);
  if (typeof maxBodyBytes === 'string') return fail(`${maxBodyBytes} bytes (Cloudflare reads at most ${REQUEST_BODY_MAX_BYTES} of a request body)`);
  const heartbeatMs = wholeNumber('HEARTBEAT_MS', env.HEARTBEAT_MS, DEFAULT_HEARTBEAT_MS, HEARTBEAT_MIN_MS, HEARTBEAT_MAX_MS);
  if (typeof heartbeatMs === 'string') return fail(`${heartbeatMs} milliseconds`);
  const plan = workersPlan(env);
  if (!plan.ok) return plan;

  const origins: GatewayConfig['origins'] = { exact: [], wildcard: [] };
  for (const raw of list(env.ALLOWED_ORIGINS)) {
    const wild = /^(https?):\/\/\*(\.[a-z0-9.-]+(?::\d+)?)$/i.exec(raw);
    if (wild) {
      origins.wildcard.push([wild[1].toLowerCase(), wild[2].toLowerCase()]);
      continue;
    }
    if (!/^https?:\/\/[a-z0-9.-]+(:\d+)?\/*$/i.test(raw) && !/^https?:\/\/\[[0-9a-f:.]+\](:\d+)?\/*$/i.test(raw)) {
      return fail(`ALLOWED_ORIGINS has "${raw}"; allowed: comma-separated origins (https://app.example.com, http://localhost:5173) or https://*.example.com`);
    }
    origins.exact.push(raw.replace(/\/+$/, '').toLowerCase());
  }
  for (const [name, value, example] of [
    ['GATEHOUSE_ISSUER', env.GATEHOUSE_ISSUER, 'https://gw.example.com'],
    ['GATEHOUSE_AUDIENCE', env.GATEHOUSE_AUDIENCE, 'https://gw.example.com/mcp'],
  ] as const) {
    const problem = urlVarProblem(value);
    if (problem) return fail(`${name} is "${value}": ${problem}; allowed: an http(s) URL such as ${example} (a trailing slash does not matter)`);
  }
  const hosts: string[] = [];
  for (const raw of list(env.ALLOWED_HOSTS)) {
    if (!/^([a-z0-9-]+(\.[a-z0-9-]+)*\.?|\[[0-9a-f:.]+\])(:\d{1,5})?$/i.test(raw)) {
      return fail(`ALLOWED_HOSTS has "${raw}"; allowed: comma-separated host names, each with an optional :port (gatehouse.example.com, 10.0.0.5:8787)`);
    }
    hosts.push(raw.toLowerCase());
  }
  return { ok: true, config: { maxBodyBytes, heartbeatMs, plan: plan.plan, origins, hosts } };
}

/** Why an issuer or audience var is not a usable URL; null when it is (or unset). */
function urlVarProblem(value: string | undefined): string | null {
  const raw = (value ?? '').trim();
  if (raw === '') return null;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'not a URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return `scheme "${u.protocol}" is not http or https`;
  if (u.search || u.hash || raw.includes('?') || raw.includes('#')) return 'it has a query or fragment';
  if (u.username || u.password) return 'it has credentials';
  return null;
}
