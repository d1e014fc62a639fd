/**
 * The script's one way out of its isolate: an RPC target living in the parent Worker's request.
 * Its methods run here, in the run_script call's context, so subprocesses use the caller's
 * principal, policy, progress token and cancellation — and nothing else is reachable.
 */
import { RpcTarget } from 'cloudflare:workers';
import { queryOutput } from '../governed/query-output.ts';
import type { HostAnswer, SubprocessValue } from './protocol.ts';
import { runSubprocess, type SubprocessContext } from './subprocess.ts';

export class ScriptHost extends RpcTarget {
  readonly #sc: SubprocessContext;

  constructor(sc: SubprocessContext) {
    super();
    this.#sc = sc;
  }

  async subprocess(req: unknown): Promise<HostAnswer<SubprocessValue>> {
    try {
      return await runSubprocess(this.#sc, req);
    } catch (e) {
      return { ok: false, error: { code: 'internal', message: `subprocess: internal error — ${e instanceof Error ? e.message : String(e)}` } };
    }
  }

  async queryOutput(handle: unknown, terms: unknown, opts: unknown): Promise<HostAnswer<unknown>> {
    // The script acts with its caller's token: reading artifacts needs the same scope as query_output.
    if (!this.#sc.ctx.principal.scopes.includes('artifacts:read')) {
      return {
        ok: false,
        error: {
          code: 'insufficient_scope',
          message: `queryOutput: insufficient_scope: reading artifacts needs a token with scope "artifacts:read"; this token has ${this.#sc.ctx.principal.scopes.join(', ') || 'no scopes'}`,
        },
      };
    }
    const overLimit = this.#sc.slot.beforeQueryOutput();
    if (overLimit) return { ok: false, error: { code: 'limit_reached', message: overLimit } };
    const o = (opts && typeof opts === 'object' ? opts : {}) as Record<string, unknown>;
    const r = await queryOutput(this.#sc.ctx.env, this.#sc.ctx.principal.team, {
      artifactHandle: handle as string,
      queryTerms: terms as string[],
      ...(o.maxExcerpts !== undefined ? { maxExcerpts: o.maxExcerpts as number } : {}),
      ...(o.contextLines !== undefined ? { contextLines: o.contextLines as number } : {}),
      ...(o.stream !== undefined ? { stream: o.stream as 'stdout' } : {}),
    });
    if (!r.ok) return { ok: false, error: { code: r.error.code, message: `queryOutput: ${r.error.message}` } };
    return { ok: true, value: r.value };
  }
}
