/**
 * The main module of a script's isolate, as source text (the Worker Loader takes modules as
 * strings). It builds the script's whole world — console, sleep, vars, the frozen `gatehouse`,
 * `Deno.Command`, `child_process.exec`, `queryOutput` — removes the network and other host-ish
 * globals, then imports `script.js` and returns what it produced.
 *
 * The isolate has no outbound network (`globalOutbound: null`) and no bindings; its one way out
 * is the `host` stub passed to `run()`, an RPC target in the parent Worker whose every
 * subprocess goes through the governed path.
 */

export const RUNNER_MODULE = 'runner.js';
export const SCRIPT_MODULE = 'script.js';

export const RUNNER_SOURCE = String.raw`
import { WorkerEntrypoint } from 'cloudflare:workers';

// Globals a script must not have. The isolate is the boundary (no network, no bindings); this
// keeps the surface to what script mode documents.
const REMOVED = ['fetch', 'WebSocket', 'EventSource', 'XMLHttpRequest', 'connect', 'caches', 'navigator', 'scheduler',
  'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'process', 'Buffer', 'global', 'require', 'module', 'exports',
  '__dirname', '__filename', 'Deno', 'gatehouse', 'child_process', 'queryOutput', 'vars', 'sleep', 'console'];

function sanitize(message) {
  // No host paths or stack frames in what the caller sees.
  return String(message)
    .replace(/(file:\/\/)?\/[\w.\-/]+\.(m?js|ts)(:\d+)*/g, '<path>')
    .replace(/\n\s+at [^\n]*/g, '');
}

function describeThrown(e) {
  if (e instanceof Error) return sanitize(e.message || e.name);
  try { return sanitize(typeof e === 'string' ? e : JSON.stringify(e)); } catch { return sanitize(String(e)); }
}

export default class ScriptRunner extends WorkerEntrypoint {
  async run(host, opts) {
    const enc = new TextEncoder();
    const lines = [];
    let consoleBytes = 0;
    let consoleTruncated = false;
    const fmt = (a) => {
      if (typeof a === 'string') return a;
      if (a instanceof Error) return (a.name || 'Error') + ': ' + a.message;
      if (a instanceof Uint8Array) return '[Uint8Array ' + a.byteLength + ' bytes]';
      try { const s = JSON.stringify(a); return s === undefined ? String(a) : s; } catch { return String(a); }
    };
    const push = (prefix, args) => {
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
      log: (...a) => push('', a),
      warn: (...a) => push('[warn] ', a),
      error: (...a) => push('[error] ', a),
      info: (...a) => push('[info] ', a),
      debug: (...a) => push('[debug] ', a),
    });

    let ticks = 0;
    let exhausted = false;
    const budget = opts.tickBudget;
    const limitMessage = 'CPU limit exceeded: the script used its execution budget (script.cpuMs = ' + opts.cpuMs + ')';
    // Once the budget is gone every guard throws, so no loop or catch block can keep running,
    // and the run ends at once even if the script is still awaiting something.
    let stop;
    const stopped = new Promise((resolve) => { stop = resolve; });
    const guard = () => { if (++ticks > budget) { exhausted = true; stop(); throw new RangeError(limitMessage); } };

    const sleep = (ms) => new Promise((r) => setTimeout(r, Math.min(Math.max(0, Number(ms) || 0), opts.sleepMaxMs)));

    const subprocess = async (req) => {
      const r = await host.subprocess(req);
      if (!r.ok) {
        const e = new Error(r.error.message);
        e.code = r.error.code;
        if (r.error.reason) e.reason = r.error.reason;
        throw e;
      }
      return r.value;
    };
    const checkEnv = (env, who) => {
      if (env === undefined) return undefined;
      if (env === null || typeof env !== 'object' || Array.isArray(env)) throw new TypeError(who + ': env must be an object of strings');
      const out = {};
      for (const [k, v] of Object.entries(env)) {
        if (typeof v !== 'string') throw new TypeError(who + ': env values must be strings (' + k + ')');
        out[k] = v;
      }
      return out;
    };
    const checkCwd = (cwd, who) => {
      if (cwd === undefined) return undefined;
      if (typeof cwd !== 'string') throw new TypeError(who + ': cwd must be a string');
      return cwd;
    };

    class Command {
      #req;
      constructor(command, options) {
        if (typeof command !== 'string') throw new TypeError('Deno.Command: command must be a string');
        const o = options ?? {};
        const args = o.args ?? [];
        if (!Array.isArray(args)) throw new TypeError('Deno.Command: args must be an array');
        this.#req = {
          op: 'command_output', command, args: args.map(String),
          cwd: checkCwd(o.cwd, 'Deno.Command'), env: checkEnv(o.env, 'Deno.Command'),
          stdin: typeof o.stdin === 'string' ? o.stdin : undefined,
        };
      }
      async output() {
        const r = await subprocess(this.#req);
        return { code: r.code, success: r.code === 0, stdout: enc.encode(r.stdout), stderr: enc.encode(r.stderr), signal: null };
      }
      outputSync() { throw new Error('Deno.Command.outputSync() is not supported; use output() instead'); }
      spawn() { throw new Error('Deno.Command.spawn() is not yet supported; use output() instead'); }
    }
    Object.freeze(Command.prototype);
    Object.freeze(Command);

    const childExec = async (command, options) => {
      if (typeof command !== 'string') throw new TypeError('child_process.exec: command must be a string');
      const o = options ?? {};
      const r = await subprocess({ op: 'exec', command, cwd: checkCwd(o.cwd, 'child_process.exec'), env: checkEnv(o.env, 'child_process.exec') });
      const buffer = o.encoding === 'buffer';
      return { code: r.code, success: r.code === 0, stdout: buffer ? enc.encode(r.stdout) : r.stdout, stderr: buffer ? enc.encode(r.stderr) : r.stderr };
    };

    const gatehouseExec = async (command, args, options) => {
      if (typeof command !== 'string') throw new TypeError('gatehouse.exec: command must be a string');
      if (args !== undefined && args !== null && !Array.isArray(args)) throw new TypeError('gatehouse.exec: args must be an array');
      const o = options ?? {};
      const timeoutMs = o.timeoutMs === undefined ? undefined : Number(o.timeoutMs);
      const r = await subprocess({
        op: 'gatehouse_exec', command, args: Array.isArray(args) ? args.map(String) : undefined,
        cwd: checkCwd(o.cwd, 'gatehouse.exec'), env: checkEnv(o.env, 'gatehouse.exec'),
        stdin: typeof o.stdin === 'string' ? o.stdin : undefined, timeoutMs,
      });
      return r.result;
    };

    const queryOutput = async (handle, terms, options) => {
      if (typeof handle !== 'string') throw new TypeError('queryOutput: handle must be a string');
      const list = typeof terms === 'string' ? [terms] : terms;
      if (!Array.isArray(list)) throw new TypeError('queryOutput: terms must be a string or an array of strings');
      const r = await host.queryOutput(handle, list.map(String), options ?? {});
      if (!r.ok) throw new Error(r.error.message);
      return r.value;
    };

    const deepFreeze = (o) => { if (o && typeof o === 'object' && !Object.isFrozen(o)) { Object.freeze(o); for (const v of Object.values(o)) deepFreeze(v); } return o; };

    const api = {
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
      for (let o = globalThis; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
        try { delete o[name]; } catch { /* non-configurable: shadowed below */ }
      }
      if (name in globalThis && !(name in api)) {
        try { Object.defineProperty(globalThis, name, { value: undefined, writable: false, configurable: false, enumerable: false }); } catch { /* the network is off anyway */ }
      }
    }
    for (const [name, value] of Object.entries(api)) {
      Object.defineProperty(globalThis, name, { value, writable: false, configurable: false, enumerable: false });
    }
    Object.defineProperty(globalThis, opts.guardName, { value: guard, writable: false, configurable: true, enumerable: false });

    let result;
    let error;
    try {
      const main = (async () => {
        const mod = await import('./script.js');
        const v = mod.default;
        return typeof v === 'function' ? await v() : await v;
      })();
      main.catch(() => {});
      result = await Promise.race([main, stopped]);
    } catch (e) {
      error = describeThrown(e);
    }
    if (exhausted) error = limitMessage;
    let json = null;
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
`;
