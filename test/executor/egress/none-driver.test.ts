/** The `none` driver cannot hold a job to a network grant: such a job is refused, one without a grant runs. */
import { describe, expect, it } from 'vitest';
import { jobSpec, suiteRig } from '../helpers.ts';

describe('egress on the none driver', () => {
  const rig = suiteRig('none');

  it('refuses a job whose grant is not off with network_unavailable naming the policy key', async () => {
    const live = { sendFrame: () => true, buffered: () => 0 };
    const network = {
      mode: 'allowlist' as const,
      allow: [{ host: 'registry.test' }],
      unlisted: 'deny' as const,
      maxBytesUp: 1,
      maxBytesDown: 1,
      source: 'rules[0].network',
    };
    const r = rig.runner.start(jobSpec({ jobId: 'net-none', command: 'true', network }), live);
    expect(r.accepted).toBe(false);
    expect(!r.accepted && r.error).toMatchObject({ type: 'job.error', jobId: 'net-none', code: 'network_unavailable' });
    expect(!r.accepted && r.error.message).toContain('rules[0].network.mode');
    const off = await rig.run({ command: 'true', network: { ...network, mode: 'off' } });
    expect(off.exit).toMatchObject({ state: 'exited', exitCode: 0 });
  });
});
