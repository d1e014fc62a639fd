/**
 * The script preparer: size limit, TypeScript stripping, body vs module, and the execution
 * guard inserted in every loop and function — checked by running the prepared code in Node
 * with a guard that counts, so a missing guard shows as a loop that never stops counting.
 */
import { describe, expect, it } from 'vitest';
import { prepareScript } from '../../src/script/prepare.ts';

/** Runs a prepared body-mode script in Node with a guard that throws after `budget` calls. */
async function runPrepared(code: string, budget = 10_000): Promise<{ result?: unknown; error?: string; ticks: number }> {
  const p = prepareScript(code, '__guard_test');
  if (!p.ok) throw new Error(p.message);
  let ticks = 0;
  (globalThis as Record<string, unknown>).__guard_test = () => {
    if (++ticks > budget) throw new RangeError('budget');
  };
  const body = p.value.source
    .replace(/^const __guard_test = [^\n]*\n/, '')
    .replace('export default async function __gatehouse_script()', 'return async function ()');
  const fn = new Function('__guard_test', body)((globalThis as Record<string, unknown>).__guard_test) as () => Promise<unknown>;
  try {
    return { result: await fn(), ticks };
  } catch (e) {
    return { error: (e as Error).message, ticks };
  }
}

describe('prepareScript', () => {
  it('refuses code over 51200 bytes with the documented message', () => {
    const r = prepareScript('x'.repeat(51_201));
    expect(r).toEqual({ ok: false, code: 'invalid_argument', message: 'Code size exceeds limit (51200 bytes)' });
    expect(prepareScript('1;' + ' '.repeat(51_198)).ok).toBe(true);
  });

  it('counts bytes, not characters', () => {
    expect(prepareScript('"' + 'é'.repeat(25_600) + '"').ok).toBe(false);
  });

  it('strips TypeScript types only when the text is not JavaScript', () => {
    const ts = prepareScript('const n: number = 1; return n as number;');
    expect(ts.ok && ts.value.typescript).toBe(true);
    const js = prepareScript('const n = 1; return n;');
    expect(js.ok && js.value.typescript).toBe(false);
  });

  it('tells a module from a body and refuses a mix or a module without export default', () => {
    const m = prepareScript('export default 1;');
    expect(m.ok && m.value.kind).toBe('module');
    expect(prepareScript('export const x = 1;')).toMatchObject({ ok: false, code: 'syntax_error' });
    expect(prepareScript('export default 1;\nreturn 2;')).toMatchObject({ ok: false, code: 'syntax_error' });
    expect(prepareScript('return {')).toMatchObject({ ok: false, code: 'syntax_error', message: expect.stringMatching(/^SyntaxError: /) });
  });

  it('guards every kind of loop and function so none can run past the budget', async () => {
    for (const code of [
      'while (true) {}',
      'for (;;);',
      'do ; while (true);',
      'for (const x of (function* () { for (;;) yield 1; })()) {}',
      'const f = () => f(); f();',
      'function f() { return f(); } f();',
      'outer: for (;;) { inner: for (;;) { continue outer; } }',
      'for (;;) { try { while (true) {} } catch (e) {} }',
      'const o = { get x() { return this.x; } }; o.x;',
      'class A { m() { for (;;) {} } } new A().m();',
      'const g = x => y => { while (1) {} }; g(1)(2);',
    ]) {
      const r = await runPrepared(code, 1000);
      expect(r.error, code).toBe('budget');
    }
  });

  it('keeps the meaning of ordinary code', async () => {
    const r = await runPrepared(
      'let s = 0; for (let i = 0; i < 10; i++) s += i; const sq = (x) => x * x; const o = { a: () => ({ b: 2 }) }; return [s, sq(3), o.a().b, [1, 2].map(x => x + 1)];',
    );
    expect(r.result).toEqual([45, 9, 2, [2, 3]]);
  });

  it('names the guard at random per script, so a script cannot know or shadow it', () => {
    const a = prepareScript('return 1;');
    const b = prepareScript('return 1;');
    expect(a.ok && b.ok && a.value.guardName !== b.value.guardName).toBe(true);
  });
});
