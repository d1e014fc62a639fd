/**
 * Stage 8: remote OPA evaluators (the subprocess-policy contract, docs/architecture.md). `POST {url}/v1/data/{policyPath}` with
 * `{"input": …}`; reads `result.allow` (or a boolean `result`). Fails closed: a network error,
 * timeout, non-2xx, unparsable body, undefined result or non-boolean allow is a "no" from that
 * evaluator, with a reason naming it. Uses only fetch + AbortController (runs in workerd).
 */
import type { PolicyDocument } from '../contracts/policy.ts';
import type { OpaVerdict } from './types.ts';

/** The input document (the subprocess-policy contract's, plus Gatehouse's caller fields). */
export interface OpaInput {
  operation: 'command_output' | 'exec';
  command: string;
  args: string[];
  cwd?: string;
  env?: Record<string, string>;
  team: string;
  subject: string;
  tool: string;
  runtime?: string;
  /** Gatehouse addition: argv | shell | code, and the source in code mode. */
  mode: 'argv' | 'shell' | 'code';
  code?: string;
}

export interface OpaOutcome {
  allowed: boolean;
  reason: string;
  verdicts: OpaVerdict[];
}

const MAX_BODY_BYTES = 1024 * 1024;

export async function askOpa(opa: PolicyDocument['opa'], input: OpaInput, fetchFn: typeof fetch, now: () => number): Promise<OpaOutcome> {
  const verdicts = await Promise.all(opa.evaluators.map((ev) => askOne(ev.url, ev.policyPath, input, opa.timeoutMs, fetchFn, now)));
  if (opa.mode === 'all') {
    const no = verdicts.find((v) => !v.allowed);
    return no ? { allowed: false, reason: no.reason, verdicts } : { allowed: true, reason: 'allowed by every OPA evaluator (mode all)', verdicts };
  }
  const yes = verdicts.find((v) => v.allowed);
  if (yes) return { allowed: true, reason: `allowed by OPA evaluator ${yes.url} (mode any)`, verdicts };
  return { allowed: false, reason: verdicts.map((v) => v.reason).join('; '), verdicts };
}

function evaluatorUrl(base: string, policyPath: string): string {
  return `${base.replace(/\/+$/, '')}/v1/data/${policyPath}`;
}

async function askOne(base: string, policyPath: string, input: OpaInput, timeoutMs: number, fetchFn: typeof fetch, now: () => number): Promise<OpaVerdict> {
  const url = evaluatorUrl(base, policyPath);
  const started = now();
  const verdict = (allowed: boolean, reason: string): OpaVerdict => ({ url, allowed, reason, elapsedMs: Math.max(0, now() - started) });
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    return verdict(false, `OPA evaluator URL ${url} is invalid`);
  }
  if (scheme !== 'http:' && scheme !== 'https:') return verdict(false, `OPA evaluator URL ${url} must be http(s)`);

  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    let res: Response;
    try {
      res = await fetchFn(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ input }),
        signal: ctl.signal,
        // A redirect is not an answer: fail closed rather than follow it somewhere else.
        redirect: 'manual',
      });
    } catch (e) {
      if (ctl.signal.aborted) return verdict(false, `OPA request to ${url} timed out after ${timeoutMs}ms`);
      return verdict(false, `OPA request failed: ${message(e)} (${url})`);
    }
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => undefined);
      return verdict(false, `OPA returned HTTP ${res.status} (${url})`);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      if (ctl.signal.aborted) return verdict(false, `OPA request to ${url} timed out after ${timeoutMs}ms`);
      return verdict(false, `OPA request failed: ${message(e)} (${url})`);
    }
    if (text.length > MAX_BODY_BYTES) return verdict(false, `Failed to parse OPA response: body larger than ${MAX_BODY_BYTES} bytes (${url})`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (e) {
      return verdict(false, `Failed to parse OPA response: ${message(e)} (${url})`);
    }
    return readAllow(body, url, verdict);
  } finally {
    clearTimeout(timer);
  }
}

function readAllow(body: unknown, url: string, verdict: (allowed: boolean, reason: string) => OpaVerdict): OpaVerdict {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return verdict(false, `Failed to parse OPA response: expected a JSON object (${url})`);
  }
  const result = (body as { result?: unknown }).result;
  if (result === undefined) return verdict(false, `OPA result is undefined at ${url} (no rule answered; missing means deny)`);
  if (typeof result === 'boolean') return verdict(result, result ? `allowed by ${url}` : `denied by OPA evaluator ${url} (result = false)`);
  if (result === null || typeof result !== 'object') {
    return verdict(false, `OPA result at ${url} is neither a boolean nor an object with "allow" (got ${describe(result)})`);
  }
  const allow = (result as { allow?: unknown }).allow;
  if (allow === undefined) return verdict(false, `OPA result.allow is undefined at ${url} (missing means deny)`);
  if (typeof allow !== 'boolean') return verdict(false, `OPA result.allow at ${url} is not a boolean (got ${describe(allow)})`);
  return verdict(allow, allow ? `allowed by ${url}` : `denied by OPA evaluator ${url} (result.allow = false)`);
}

function describe(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}

function message(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    return cause instanceof Error && cause.message ? `${e.message}: ${cause.message}` : e.message;
  }
  return String(e);
}
