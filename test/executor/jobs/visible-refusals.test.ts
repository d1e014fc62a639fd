/**
 * The agent's own refusals quote the job's cwd or executable: every control and bidi character in
 * them is shown as a visible escape (src/contracts/visible-text.ts), whatever the edge sent.
 */
import { describe, expect, it } from 'vitest';
import { jobSpec, suiteRig } from '../helpers.ts';
import type { JobSpec } from '../../../src/contracts/agent-protocol.ts';
import { DISCARD_LIVE } from '../../../executor/jobs/relay.ts';

/** Any C0/C1 control, DEL or bidi control left raw. */
const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

const rig = suiteRig('none', { capacity: 2, maxTimeoutMs: 600 });

let n = 0;
function refusal(p: Partial<JobSpec>) {
  const r = rig.runner.start(jobSpec({ jobId: `visible-${++n}`, ...p }), DISCARD_LIVE);
  if (r.accepted) throw new Error('expected a refusal');
  return r.error;
}

describe("the agent's refusals show what they quote", () => {
  it('a cwd with U+202E that does not exist: the message says \\u202e, never the raw character', () => {
    const e = refusal({ cwd: 'nope\u202egnp.exe' });
    expect(e).toMatchObject({ code: 'invalid_argument', message: 'Relative CWD "nope\\u202egnp.exe" does not exist in the workspace' });
    expect(RAW.test(e.message)).toBe(false);
  });

  it('an absolute cwd with ESC, NUL and the isolates', () => {
    const e = refusal({ cwd: '/etc\x1b[8m\0\u2066\u2069' });
    expect(e).toMatchObject({
      code: 'policy_denied',
      message: 'Relative CWD "/etc\\x1b[8m\\x00\\u2066\\u2069" contains path traversal or absolute path components',
    });
    expect(RAW.test(e.message)).toBe(false);
  });
});
