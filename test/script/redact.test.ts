/** Credentials cut out of error text, in every form a request carries them (src/script/redact.ts). */
import { describe, expect, it } from 'vitest';
import { redactSecrets } from '../../src/script/redact.ts';

describe('redactSecrets', () => {
  it('cuts a secret raw, URL-encoded and form-encoded', () => {
    const verifier = 'a~b+c/d=e f';
    const text = `raw ${verifier}; url ${encodeURIComponent(verifier)}; form ${new URLSearchParams({ v: verifier }).toString()}`;
    const out = redactSecrets(text, [verifier]);
    expect(out).toBe('raw [redacted]; url [redacted]; form v=[redacted]');
  });

  it('cuts a secret that contains another whole, and leaves short values alone', () => {
    expect(redactSecrets('token abcdef-123456 and abc', ['abcdef', 'abcdef-123456', 'ab'])).toBe('token [redacted] and abc');
  });
});
