/** Script mode's own limits fit the platform's: the isolate's whole report must cross one RPC return. */
import { describe, expect, it } from 'vitest';
import { CONSOLE_MAX_BYTES, REPORT_OVERHEAD_BYTES, RETURN_MAX_BYTES } from '../../src/script/limits.ts';
import { RPC_MAX_SERIALIZED_BYTES } from '../../src/platform/limits.ts';
import { parsePolicy } from '../../src/policy/parse.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

describe('script limits', () => {
  it('a full console plus a full return value fit in one Workers RPC message (32 MiB)', () => {
    expect(RPC_MAX_SERIALIZED_BYTES).toBe(33_554_432);
    expect(CONSOLE_MAX_BYTES + RETURN_MAX_BYTES + REPORT_OVERHEAD_BYTES).toBeLessThanOrEqual(RPC_MAX_SERIALIZED_BYTES);
  });

  it('script.cpuMs stays within what Cloudflare lets a Worker have (5 minutes of CPU), default 30 s', () => {
    const withCpu = (cpuMs: number) => parsePolicy({ ...DEFAULT_POLICY, script: { enabled: true, cpuMs } });
    expect(withCpu(300_000).ok).toBe(true);
    const over = withCpu(300_001);
    expect(over.ok).toBe(false);
    if (!over.ok) expect(over.error.message).toMatch(/script\.cpuMs/);
    const dflt = parsePolicy({ ...DEFAULT_POLICY, script: { enabled: true } });
    expect(dflt.ok && dflt.value.script.cpuMs).toBe(30_000);
  });
});
