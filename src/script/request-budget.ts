/**
 * What script mode costs in subrequests, and the ledger that keeps one request under Cloudflare's
 * limits (the limits and the plan: src/platform/). A script runs inside ONE incoming request (the
 * MCP POST that carries the tools/call), so every call its subprocesses make to D1, R2, the team's
 * Durable Object and OPA is a subrequest of that request, and its isolate is a Dynamic Worker in
 * flight in it. A JSON-RPC batch may carry several run_script calls: they share one request, so
 * they share one ledger.
 *
 * ```ts
 * const ledger = requestLedger(principal, plan);                 // one per HTTP request
 * const opened = ledger.openScript(policyCap, opaEvaluators);    // refuses when the request is full
 * const refusal = opened.ok && opened.slot.beforeSubprocess(started); // null, or the limit's message
 * if (opened.ok) opened.slot.close();
 * ```
 */
import type { Principal } from '../auth/principal.ts';
import { DYNAMIC_WORKERS_PER_WORKER_REQUEST, SUBREQUESTS_PER_REQUEST, type WorkersPlan } from '../platform/limits.ts';
import { WORKERS_PLAN_NAMES, WORKERS_PLAN_VAR } from '../platform/plan.ts';
import { QUERY_OUTPUT_SUBREQUESTS } from '../governed/query-output.ts';

/*
 * What each step of a script costs in subrequests, counted on the code path (worst case of each path).
 * If you add a D1/R2/DO/fetch call to one of these paths, raise its number here. (Each tool's cost
 * sits beside the tool: src/mcp/tools/, `ToolCost`.)
 */
/**
 * Before any tool runs: the admission query (D1: revocation + policy version), the two rate-limit
 * binding calls (token, team), and the external issuer's JWKS fetch (only with EXTERNAL_JWKS_URL,
 * when its cache is cold). Counted once per request, however many calls a batch holds.
 */
export const REQUEST_SUBREQUESTS = 4;
/** A script's start: the team policy read (D1, on a policy-cache miss) and the call into its Dynamic Worker. */
export const SCRIPT_START_SUBREQUESTS = 2;
/**
 * A script's end: its output artifact (per stream — stdout, stderr — an R2 put, a D1 index row, and
 * an R2 delete if the index row fails), its audit row (D1), and cancelling subprocesses still
 * running after a timeout or a hang-up (a DO call from the script, and on a hang-up one more from
 * the running subprocess's own stream-close handler).
 */
export const SCRIPT_END_SUBREQUESTS = 2 * 3 + 1 + 2;
/** The audit row of the first subprocess refused for this limit, so the refusal is on record. */
export const REFUSAL_AUDIT_SUBREQUESTS = 1;
/**
 * One subprocess, besides one fetch per remote OPA evaluator: the team policy read (D1, on a
 * cache miss), then either its denial's audit row (D1) or the submit-and-follow call to the team's
 * DO (which writes the job's and the audit's D1 rows itself, in its own requests), plus a `failed`
 * audit row (D1) if the DO call fails. Not counted: the status polls that follow a job when the DO's event stream breaks
 * (a DO restart mid-job), a path too rare to hold back for on every subprocess.
 */
export const SUBPROCESS_BASE_SUBREQUESTS = 3;

export function subprocessCost(opaEvaluators: number): number {
  return SUBPROCESS_BASE_SUBREQUESTS + opaEvaluators;
}

/**
 * Subprocesses one script may start when it is alone in its request:
 * min(policy cap, floor((limit − the request's and the script's fixed subrequests) / per-subprocess cost)).
 */
export function effectiveSubprocessCap(plan: WorkersPlan, policyCap: number, opaEvaluators: number): number {
  const fixed = REQUEST_SUBREQUESTS + SCRIPT_START_SUBREQUESTS + SCRIPT_END_SUBREQUESTS + REFUSAL_AUDIT_SUBREQUESTS;
  return Math.max(0, Math.min(policyCap, Math.floor((SUBREQUESTS_PER_REQUEST[plan] - fixed) / subprocessCost(opaEvaluators))));
}

/** What the limit message says about the plan: its name, its number, and the setting that chose it. */
export function planPhrase(plan: WorkersPlan): string {
  return `Cloudflare allows ${SUBREQUESTS_PER_REQUEST[plan]} subrequests per request on the ${WORKERS_PLAN_NAMES[plan]} plan (${WORKERS_PLAN_VAR} = "${plan}")`;
}

/** One HTTP request's account of subrequests and Dynamic Workers in flight. */
export class RequestLedger {
  readonly plan: WorkersPlan;
  readonly limit: number;
  /** Subrequests already made (or, for the fixed overhead, possibly made) by this request. */
  used = REQUEST_SUBREQUESTS;
  /** Held back for the ends of the scripts still running. */
  reserved = 0;
  dynamicWorkers = 0;

  constructor(plan: WorkersPlan) {
    this.plan = plan;
    this.limit = SUBREQUESTS_PER_REQUEST[plan];
  }

  free(): number {
    return this.limit - this.used - this.reserved;
  }

  /** The batch's other calls (everything but run_script), counted up front: scripts get what they leave. */
  chargeBatch(subrequests: number): void {
    this.reserved += subrequests;
  }

  /** Whether one more D1 write (a refusal's audit row) fits; takes it if so. */
  takeAudit(): boolean {
    if (this.free() < 1) return false;
    this.used += 1;
    return true;
  }

  /**
   * A run_script call starting: takes a Dynamic Worker slot and reserves its end. Refuses (with the
   * message for the caller) when the request already has 4 isolates in flight or no room for one more script.
   */
  openScript(policyCap: number, opaEvaluators: number): { ok: true; slot: ScriptSlot } | { ok: false; message: string } {
    if (this.dynamicWorkers >= DYNAMIC_WORKERS_PER_WORKER_REQUEST) {
      return {
        ok: false,
        message: `Error: too many scripts in one request: Cloudflare allows ${DYNAMIC_WORKERS_PER_WORKER_REQUEST} Dynamic Workers in flight per Worker request and this request already runs ${this.dynamicWorkers} run_script calls; send this call in its own request (or at most ${DYNAMIC_WORKERS_PER_WORKER_REQUEST} run_script calls per JSON-RPC batch)`,
      };
    }
    const need = SCRIPT_START_SUBREQUESTS + SCRIPT_END_SUBREQUESTS + REFUSAL_AUDIT_SUBREQUESTS;
    if (this.free() < need) {
      return {
        ok: false,
        message: `Error: subrequest limit: ${planPhrase(this.plan)}; this request has ${this.free()} left and a script needs ${need} for its start, output and audit; send this call in its own request`,
      };
    }
    this.dynamicWorkers += 1;
    this.used += SCRIPT_START_SUBREQUESTS;
    this.reserved += SCRIPT_END_SUBREQUESTS + REFUSAL_AUDIT_SUBREQUESTS;
    return { ok: true, slot: new ScriptSlot(this, policyCap, opaEvaluators) };
  }
}

/** One script's share of its request's ledger. */
export class ScriptSlot {
  #ledger: RequestLedger;
  #closed = false;
  #refusalAudited = false;
  readonly cap: number;
  readonly cost: number;

  constructor(ledger: RequestLedger, policyCap: number, opaEvaluators: number) {
    this.#ledger = ledger;
    this.cost = subprocessCost(opaEvaluators);
    this.cap = effectiveSubprocessCap(ledger.plan, policyCap, opaEvaluators);
  }

  get plan(): WorkersPlan {
    return this.#ledger.plan;
  }

  /** Subrequests this request has used so far (fixed overhead included). */
  get used(): number {
    return this.#ledger.used;
  }

  /**
   * Before a subprocess: null when there is room for it (and its cost is taken), else the message
   * naming the limit, the plan and how many subprocesses this script started.
   */
  beforeSubprocess(started: number): string | null {
    if (this.#ledger.free() >= this.cost) {
      this.#ledger.used += this.cost;
      return null;
    }
    return `subprocess: limit reached — ${planPhrase(this.#ledger.plan)}; each subprocess costs up to ${this.cost} (D1, Durable Object${this.cost > SUBPROCESS_BASE_SUBREQUESTS ? ', OPA' : ''}) and this script's output and audit need their share, so it may start at most ${this.cap} subprocess${this.cap === 1 ? '' : 'es'} in one request (script.subprocess.maxCount allows more); it has started ${started}`;
  }

  /** Before queryOutput: null when there is room, else the limit's message. */
  beforeQueryOutput(): string | null {
    if (this.#ledger.free() >= QUERY_OUTPUT_SUBREQUESTS) {
      this.#ledger.used += QUERY_OUTPUT_SUBREQUESTS;
      return null;
    }
    return `queryOutput: limit reached — ${planPhrase(this.#ledger.plan)} and this request has ${this.#ledger.free()} left (queryOutput needs ${QUERY_OUTPUT_SUBREQUESTS})`;
  }

  /** Before a server call (`servers.<id>`) that costs `subrequests`: null when there is room (and it is taken), else the limit's message. */
  beforeServerCall(subrequests: number): string | null {
    if (this.#ledger.free() >= subrequests) {
      this.#ledger.used += subrequests;
      return null;
    }
    return `limit reached — ${planPhrase(this.#ledger.plan)} and this request has ${this.#ledger.free()} left (this server call needs ${subrequests})`;
  }

  /**
   * Whether a refused subprocess may get its audit row (one D1 write): the script's first refusal
   * always may (its subrequest is reserved); later ones only while the request has room, so a script
   * that keeps asking after a refusal cannot push the request over the limit.
   */
  takeRefusalAudit(): boolean {
    if (!this.#refusalAudited) {
      this.#refusalAudited = true;
      this.#ledger.reserved -= REFUSAL_AUDIT_SUBREQUESTS;
      this.#ledger.used += REFUSAL_AUDIT_SUBREQUESTS;
      return true;
    }
    if (this.#ledger.free() < 1) return false;
    this.#ledger.used += 1;
    return true;
  }

  /** The script ended: its end's reserve becomes use, and its Dynamic Worker slot is free again. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const rest = SCRIPT_END_SUBREQUESTS + (this.#refusalAudited ? 0 : REFUSAL_AUDIT_SUBREQUESTS);
    this.#ledger.reserved -= rest;
    this.#ledger.used += SCRIPT_END_SUBREQUESTS;
    this.#ledger.dynamicWorkers -= 1;
  }
}

/** Keyed by the request's principal: auth makes one per request, so a batch's calls share it. */
const ledgers = new WeakMap<Principal, RequestLedger>();

export function requestLedger(principal: Principal, plan: WorkersPlan): RequestLedger {
  let l = ledgers.get(principal);
  if (!l) {
    l = new RequestLedger(plan);
    ledgers.set(principal, l);
  }
  return l;
}
