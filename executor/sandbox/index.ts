/**
 * Picks and starts a sandbox driver: the one asked for, or the strongest that works here
 * (gVisor, then bubblewrap). Never falls back to no isolation unless told `--sandbox none`.
 */
import { BwrapDriver, bwrapAvailable } from './bwrap.ts';
import { GvisorDriver, runscAvailable } from './gvisor.ts';
import { NoneDriver } from './none.ts';
import type { DriverOptions, SandboxDriver } from './types.ts';
import type { SandboxKind } from '../../src/contracts/agent-protocol.ts';
import type { Result } from '../../src/contracts/errors.ts';
import type { Logger } from '../log.ts';

export type { SandboxDriver } from './types.ts';

export async function startDriver(kind: SandboxKind, opts: DriverOptions, log: Logger): Promise<Result<SandboxDriver>> {
  try {
    if (kind === 'gvisor') {
      if (!(await runscAvailable()))
        return { ok: false, error: { code: 'config_error', message: 'gVisor requested but `runsc` is not installed (Debian package runsc)' } };
      const d = new GvisorDriver(opts, log);
      await d.init();
      return { ok: true, value: d };
    }
    if (kind === 'bwrap') {
      if (!(await bwrapAvailable()))
        return { ok: false, error: { code: 'config_error', message: 'bubblewrap requested but `bwrap` is not installed (Debian package bubblewrap)' } };
      const d = new BwrapDriver(opts, log);
      await d.init();
      return { ok: true, value: d };
    }
    const d = new NoneDriver(opts, log);
    await d.init();
    return { ok: true, value: d };
  } catch (e) {
    return { ok: false, error: { code: 'config_error', message: `${kind} sandbox does not work here: ${(e as Error).message}` } };
  }
}

/** The strongest driver that works: gvisor, else bwrap; none is never chosen implicitly. */
export async function startStrongestDriver(opts: DriverOptions, log: Logger): Promise<Result<SandboxDriver>> {
  const reasons: string[] = [];
  for (const kind of ['gvisor', 'bwrap'] as const) {
    const r = await startDriver(kind, opts, log);
    if (r.ok) return r;
    reasons.push(r.error.message);
    log.warn(`${kind} unavailable: ${r.error.message}`);
  }
  return {
    ok: false,
    error: {
      code: 'config_error',
      message: `no sandbox works here (${reasons.join('; ')}); install runsc or bubblewrap, or pass --sandbox none explicitly (no isolation)`,
    },
  };
}
