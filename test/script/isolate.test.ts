/** One run_script call is one Dynamic Worker: a counting loader sees one load() and one entrypoint per script. */
import { describe, expect, it } from 'vitest';
import { openIsolate } from '../../src/script/isolate.ts';

function countingLoader() {
  const calls = { load: 0, getEntrypoint: 0, configs: [] as Array<Record<string, unknown>> };
  const loader = {
    load(config: Record<string, unknown>) {
      calls.load += 1;
      calls.configs.push(config);
      return {
        getEntrypoint: () => {
          calls.getEntrypoint += 1;
          return { run: async () => ({}) };
        },
      };
    },
  };
  return { loader: loader as unknown as Pick<WorkerLoader, 'load'>, calls };
}

describe("a script's Dynamic Worker", () => {
  it('each script loads exactly one fresh isolate (load, never a cached get) with no network, no bindings and its CPU limit', () => {
    const { loader, calls } = countingLoader();
    openIsolate(loader, { cpuMs: 1234 }, 'return 1');
    expect(calls).toMatchObject({ load: 1, getEntrypoint: 1 });
    openIsolate(loader, { cpuMs: 1234 }, 'return 2');
    expect(calls).toMatchObject({ load: 2, getEntrypoint: 2 });
    const cfg = calls.configs[0];
    expect(cfg.globalOutbound).toBeNull();
    expect(cfg.env).toEqual({});
    expect(cfg.limits).toEqual({ cpuMs: 1234 });
  });

  it('its main module is the runner as the build bundled it (src/script/isolate-runner.ts), beside the script', () => {
    const { loader, calls } = countingLoader();
    openIsolate(loader, { cpuMs: 1 }, 'return 1');
    const { mainModule, modules } = calls.configs[0] as { mainModule: string; modules: Record<string, string> };
    expect(Object.keys(modules).sort()).toEqual([mainModule, 'script.js'].sort());
    expect(modules[mainModule]).toMatch(/^import \{ WorkerEntrypoint \} from "cloudflare:workers";$/m);
    expect(modules[mainModule]).toContain('extends WorkerEntrypoint');
    expect(modules['script.js']).toBe('return 1');
  });
});
