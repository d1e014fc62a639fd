import { describe, expect, it } from 'vitest';
import { ExecuteInput, PolicyCheckInput, QueryOutputInput, RuntimeExecuteInput } from '../../src/contracts/tools.ts';
import { strictInput } from '../../src/contracts/strict-input.ts';
import { parsePolicy } from '../../src/policy/parse.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

function errorOf(schema: ReturnType<typeof strictInput>, value: unknown): string {
  const r = schema.safeParse(value);
  expect(r.success).toBe(false);
  return r.success ? '' : r.error.issues.map((i) => i.message).join('; ');
}

describe('unknown tool arguments are an error naming the valid keys and the likely one', () => {
  it('execute {"command":"ls","arg":["-l"]} is refused, suggesting "args"', () => {
    const m = errorOf(strictInput(ExecuteInput), { command: 'ls', arg: ['-l'] });
    expect(m).toContain('unknown key "arg" (did you mean "args"?)');
    expect(m).toContain('valid keys: command, args');
  });
  it('execute "timeout" suggests "timeout_ms"', () => {
    expect(errorOf(strictInput(ExecuteInput), { command: 'ls', timeout: 5 })).toContain('"timeout" (did you mean "timeout_ms"?)');
  });
  it('runtime_execute "timeout_ms" suggests "timeoutMs", "cwd" suggests "relativeCwd"', () => {
    const m = errorOf(strictInput(RuntimeExecuteInput), { runtime: 'python', timeout_ms: 5, cwd: 'x' });
    expect(m).toContain('"timeout_ms" (did you mean "timeoutMs"?)');
    expect(m).toContain('"cwd" (did you mean "relativeCwd"?)');
  });
  it('typos find their key; valid input still parses', () => {
    expect(errorOf(strictInput(QueryOutputInput), { artifactHandle: 'a', queryTerm: ['x'] })).toContain('did you mean "queryTerms"');
    expect(errorOf(strictInput(PolicyCheckInput), { command: 'ls', comand: 'x' })).toContain('did you mean "command"');
    expect(strictInput(ExecuteInput).safeParse({ command: 'ls', args: ['-l'], timeout_ms: 5 }).success).toBe(true);
  });
});

describe('unknown keys in a policy document are refused with their path', () => {
  it('a typo "shel" at the top level', () => {
    const r = parsePolicy({ ...DEFAULT_POLICY, shel: { enabled: true } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toMatch(/^\(root\): unknown key "shel" \(did you mean "shell"\?\); valid keys: version, execute/);
  });
  it('nested keys name their path, including inside records', () => {
    const r = parsePolicy({ version: 1, limits: { maxTimeout: 5 }, argumentRules: { git: { deny: [], allowInline: true } } });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.message).toContain('limits: unknown key "maxTimeout" (did you mean "maxTimeoutMs"?)');
      expect(r.error.message).toContain('argumentRules.git: unknown key "allowInline" (did you mean "allowInlineCode"?)');
    }
  });
  it('the default policy itself has no unknown keys', () => {
    expect(parsePolicy(JSON.parse(JSON.stringify(DEFAULT_POLICY))).ok).toBe(true);
  });
});
