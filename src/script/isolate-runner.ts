/**
 * The main module of a script's isolate. It builds the script's whole world — console, sleep, vars,
 * the frozen `gatehouse`, `Deno.Command`, `child_process.exec`, `queryOutput` — removes the network
 * and other host-ish globals, then imports the script's module and returns what it produced.
 *
 * It runs in the isolate, not in the Worker: the build bundles it alone into one ES module
 * (scripts/build-isolate-runner.ts), which src/script/isolate.ts hands to the Worker Loader as text.
 * So it imports nothing at run time but `cloudflare:workers` (types from ./protocol.ts are erased).
 *
 * The isolate has no outbound network (`globalOutbound: null`) and no bindings; its one way out
 * is the `host` stub passed to `run()`, an RPC target in the parent Worker (src/script/script-host.ts)
 * whose every subprocess goes through the governed path.
 */
import { WorkerEntrypoint } from 'cloudflare:workers';
import { SCRIPT_MODULE } from './isolate-modules.ts';
import type { HostAnswer, ScriptRunOptions, ScriptRunReport, SubprocessValue } from './protocol.ts';

/** What the runner calls on the parent's ScriptHost (src/script/script-host.ts), through Workers RPC. */
interface Host {
  subprocess(req: unknown): Promise<HostAnswer<SubprocessValue>>;
  queryOutput(handle: string, terms: string[], opts: unknown): Promise<HostAnswer<unknown>>;
}

/** A subprocess's refusal as the script sees it: an Error carrying the answer's code and reason. */
type SubprocessError = Error & { code?: string; reason?: string };

type Options = { args?: unknown; cwd?: unknown; env?: unknown; stdin?: unknown; encoding?: unknown; timeoutMs?: unknown };

// Globals a script must not have. The isolate is the boundary (no network, no bindings); this
// keeps the surface to what script mode documents.
const REMOVED = [
  'fetch',
  'WebSocket',
  'EventSource',
  'XMLHttpRequest',
  'connect',
  'caches',
  'navigator',
  'scheduler',
  'WebAssembly',
  'SharedArrayBuffer',
  'Atomics',
  'process',
  'Buffer',
  'global',
  'require',
  'module',
  'exports',
  '__dirname',
  '__filename',
  'Deno',
  'gatehouse',
  'child_process',
  'queryOutput',
  'vars',
  'sleep',
  'console',
];

function sanitize(message: unknown): string {
  // No host paths or stack frames in what the caller sees.
  return String(message)
    .replace(/(file:\/\/)?\/[\w.\-/]+\.(m?js|ts)(:\d+)*/g, '<path>')
    .replace(/\n\s+at [^\n]*/g, '');
}

function describeThrown(e: unknown): string {
  if (e instanceof Error) return sanitize(e.message || e.name);
  try {
    return sanitize(typeof e === 'string' ? e : JSON.stringify(e));
  } catch {
    return sanitize(String(e));
  }
}

export default class ScriptRunner extends WorkerEntrypoint {
  async run(host: Host, opts: ScriptRunOptions): Promise<ScriptRunReport> {
    const enc = new TextEncoder();
    const lines: string[] = [];
    let consoleBytes = 0;
    let consoleTruncated = false;
    const fmt = (a: unknown): string => {
      if (typeof a === 'string') return a;
      if (a instanceof Error) return (a.name || 'Error') + ': ' + a.message;
      if (a instanceof Uint8Array) return '[Uint8Array ' + a.byteLength + ' bytes]';
      try {
        const s = JSON.stringify(a);
        return s === undefined ? String(a) : s;
      } catch {
        return String(a);
      }
    };
    const push = (prefix: string, args: unknown[]) => {
      if (consoleTruncated) return;
      const line = prefix + args.map(fmt).join(' ');
      const n = enc.encode(line).byteLength + 1;
      if (consoleBytes + n > opts.consoleMaxBytes) {
        consoleTruncated = true;
        lines.push('[output truncated]');
        return;
      }
      consoleBytes += n;
      lines.push(line);
    };
    const console = Object.freeze({
      log: (...a: unknown[]) => push('', a),
      warn: (...a: unknown[]) => push('[warn] ', a),
      error: (...a: unknown[]) => push('[error] ', a),
      info: (...a: unknown[]) => push('[info] ', a),
      debug: (...a: unknown[]) => push('[debug] ', a),
    });

    let ticks = 0;
    let exhausted = false;
    const budget = opts.tickBudget;
    const limitMessage = 'CPU limit exceeded: the script used its execution budget (script.cpuMs = ' + opts.cpuMs + ')';
    // Once the budget is gone every guard throws, so no loop or catch block can keep running,
    // and the run ends at once even if the script is still awaiting something.
    let stop = () => {};
    const stopped = new Promise<undefined>((resolve) => {
      stop = () => resolve(undefined);
    });
    const guard = () => {
      if (++ticks > budget) {
        exhausted = true;
        stop();
        throw new RangeError(limitMessage);
      }
    };

    const sleep = (ms: unknown) => new Promise((r) => setTimeout(r, Math.min(Math.max(0, Number(ms) || 0), opts.sleepMaxMs)));

    const subprocess = async (req: Record<string, unknown>): Promise<SubprocessValue> => {
      const r = await host.subprocess(req);
      if (!r.ok) {
        const e: SubprocessError = new Error(r.error.message);
        e.code = r.error.code;
        if (r.error.reason) e.reason = r.error.reason;
        throw e;
      }
      return r.value;
    };
    const checkEnv = (env: unknown, who: string): Record<string, string> | undefined => {
      if (env === undefined) return undefined;
      if (env === null || typeof env !== 'object' || Array.isArray(env)) throw new TypeError(who + ': env must be an object of strings');
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(env)) {
        if (typeof v !== 'string') throw new TypeError(who + ': env values must be strings (' + k + ')');
        out[k] = v;
      }
      return out;
    };
    const checkCwd = (cwd: unknown, who: string): string | undefined => {
      if (cwd === undefined) return undefined;
      if (typeof cwd !== 'string') throw new TypeError(who + ': cwd must be a string');
      return cwd;
    };

    class Command {
      #req: Record<string, unknown>;
      constructor(command: unknown, options?: Options | null) {
        if (typeof command !== 'string') throw new TypeError('Deno.Command: command must be a string');
        const o = options ?? {};
        const args = o.args ?? [];
        if (!Array.isArray(args)) throw new TypeError('Deno.Command: args must be an array');
        this.#req = {
          op: 'command_output',
          command,
          args: args.map(String),
          cwd: checkCwd(o.cwd, 'Deno.Command'),
          env: checkEnv(o.env, 'Deno.Command'),
          stdin: typeof o.stdin === 'string' ? o.stdin : undefined,
        };
      }
      async output() {
        const r = await subprocess(this.#req);
        return { code: r.code, success: r.code === 0, stdout: enc.encode(r.stdout), stderr: enc.encode(r.stderr), signal: null };
      }
      outputSync() {
        throw new Error('Deno.Command.outputSync() is not supported; use output() instead');
      }
      spawn() {
        throw new Error('Deno.Command.spawn() is not yet supported; use output() instead');
      }
    }
    Object.freeze(Command.prototype);
    Object.freeze(Command);

    const childExec = async (command: unknown, options?: Options | null) => {
      if (typeof command !== 'string') throw new TypeError('child_process.exec: command must be a string');
      const o = options ?? {};
      const r = await subprocess({ op: 'exec', command, cwd: checkCwd(o.cwd, 'child_process.exec'), env: checkEnv(o.env, 'child_process.exec') });
      const buffer = o.encoding === 'buffer';
      return { code: r.code, success: r.code === 0, stdout: buffer ? enc.encode(r.stdout) : r.stdout, stderr: buffer ? enc.encode(r.stderr) : r.stderr };
    };

    const gatehouseExec = async (command: unknown, args?: unknown, options?: Options | null) => {
      if (typeof command !== 'string') throw new TypeError('gatehouse.exec: command must be a string');
      if (args !== undefined && args !== null && !Array.isArray(args)) throw new TypeError('gatehouse.exec: args must be an array');
      const o = options ?? {};
      const timeoutMs = o.timeoutMs === undefined ? undefined : Number(o.timeoutMs);
      const r = await subprocess({
        op: 'gatehouse_exec',
        command,
        args: Array.isArray(args) ? args.map(String) : undefined,
        cwd: checkCwd(o.cwd, 'gatehouse.exec'),
        env: checkEnv(o.env, 'gatehouse.exec'),
        stdin: typeof o.stdin === 'string' ? o.stdin : undefined,
        timeoutMs,
      });
      return r.result;
    };

    const queryOutput = async (handle: unknown, terms: unknown, options?: unknown) => {
      if (typeof handle !== 'string') throw new TypeError('queryOutput: handle must be a string');
      const list = typeof terms === 'string' ? [terms] : terms;
      if (!Array.isArray(list)) throw new TypeError('queryOutput: terms must be a string or an array of strings');
      const r = await host.queryOutput(handle, list.map(String), options ?? {});
      if (!r.ok) throw new Error(r.error.message);
      return r.value;
    };

    const deepFreeze = <T>(o: T): T => {
      if (o && typeof o === 'object' && !Object.isFrozen(o)) {
        Object.freeze(o);
        for (const v of Object.values(o)) deepFreeze(v);
      }
      return o;
    };

    const api: Record<string, unknown> = {
      console,
      sleep,
      vars: deepFreeze(opts.vars ?? {}),
      gatehouse: Object.freeze({ exec: gatehouseExec, queryOutput }),
      Deno: Object.freeze({ Command }),
      child_process: Object.freeze({ exec: childExec }),
      queryOutput,
    };
    // Some of these (fetch, WebSocket, …) live on the global object's prototypes, not on the
    // global itself: delete them along the whole chain, then shadow whatever is left.
    for (const name of REMOVED) {
      for (let o: object | null = globalThis; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
        try {
          delete (o as Record<string, unknown>)[name];
        } catch {
          // non-configurable: shadowed below
        }
      }
      if (name in globalThis && !(name in api)) {
        try {
          Object.defineProperty(globalThis, name, { value: undefined, writable: false, configurable: false, enumerable: false });
        } catch {
          // the network is off anyway
        }
      }
    }
    for (const [name, value] of Object.entries(api)) {
      Object.defineProperty(globalThis, name, { value, writable: false, configurable: false, enumerable: false });
    }
    Object.defineProperty(globalThis, opts.guardName, { value: guard, writable: false, configurable: true, enumerable: false });

    let result: unknown;
    let error: string | undefined;
    try {
      const main = (async () => {
        // The script's module sits beside this one in the isolate (src/script/isolate.ts); a
        // specifier held in a variable is left for the isolate to resolve, not bundled.
        const specifier = `./${SCRIPT_MODULE}`;
        const mod = (await import(specifier)) as { default?: unknown };
        const v = mod.default;
        return typeof v === 'function' ? await v() : await v;
      })();
      main.catch(() => {});
      result = await Promise.race([main, stopped]);
    } catch (e) {
      error = describeThrown(e);
    }
    if (exhausted) error = limitMessage;
    let json: string | null | undefined = null;
    if (error === undefined && result !== undefined) {
      try {
        json = JSON.stringify(result);
      } catch (e) {
        error = 'Return value is not JSON-serializable: ' + describeThrown(e);
      }
      if (json !== null && json !== undefined && enc.encode(json).byteLength > opts.returnMaxBytes) {
        json = null;
        error = 'Return value exceeds limit (' + opts.returnMaxBytes + ' bytes)';
      }
      if (json === undefined) json = null;
    }
    return { console: lines.join('\n'), consoleTruncated, resultJson: error === undefined ? json : null, error: error ?? null, ticks };
  }
}
