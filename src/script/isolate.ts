/**
 * A script's Dynamic Worker: one fresh isolate per run_script call, no network, no bindings, a CPU
 * limit. Kept apart from the run loop so the binding use — exactly one `load()` and one entrypoint
 * per script — can be checked against a counting loader.
 */
import type { ScriptPolicy } from '../contracts/policy.ts';
import { ISOLATE_COMPATIBILITY_DATE } from './limits.ts';
import { RUNNER_MODULE, SCRIPT_MODULE } from './isolate-modules.ts';
// The runner (src/script/isolate-runner.ts) as the build bundled it: the Worker Loader takes modules as text.
import RUNNER_SOURCE from '../../build/isolate/runner.txt';
import type { ScriptRunOptions, ScriptRunReport } from './protocol.ts';

export interface ScriptEntrypoint<Host> {
  run(host: Host, opts: ScriptRunOptions): Promise<ScriptRunReport>;
}

export function openIsolate<Host>(loader: Pick<WorkerLoader, 'load'>, script: Pick<ScriptPolicy, 'cpuMs'>, source: string): ScriptEntrypoint<Host> {
  // load(), not get(): every script gets a fresh isolate, so nothing one script does to its
  // globals or prototypes is seen by the next. That is one Dynamic Worker per call; a request's
  // calls together stay within Cloudflare's 4 in flight (request-budget.ts).
  const worker = loader.load({
    compatibilityDate: ISOLATE_COMPATIBILITY_DATE,
    mainModule: RUNNER_MODULE,
    modules: { [RUNNER_MODULE]: RUNNER_SOURCE, [SCRIPT_MODULE]: source },
    globalOutbound: null,
    env: {},
    limits: { cpuMs: script.cpuMs },
  });
  return worker.getEntrypoint() as unknown as ScriptEntrypoint<Host>;
}
