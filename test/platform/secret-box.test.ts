/** Team secrets at rest: sealed with AES-256-GCM; a wrong key, another context or an altered value never opens. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { importSecretsKey, openSecret, sealSecret, secretsKey } from '../../src/platform/secret-box.ts';

const newKey = async () => {
  const r = await importSecretsKey(randomBytes(32).toString('base64'));
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
};

describe('secret box', () => {
  it('opens what it sealed, and never shows the plaintext in the sealed text', async () => {
    const key = await newKey();
    const sealed = await sealSecret(key, 'ghp_s3cr3t-värde', 'team-a/github');
    expect(sealed).toMatch(/^v1\.[\w-]+\.[\w-]+$/);
    expect(sealed).not.toContain('s3cr3t');
    expect(await openSecret(key, sealed, 'team-a/github')).toEqual({ ok: true, value: 'ghp_s3cr3t-värde' });
    // A fresh IV each time: the same value sealed twice is two different texts.
    expect(await sealSecret(key, 'x')).not.toBe(await sealSecret(key, 'x'));
  });

  it('refuses a value sealed under another key', async () => {
    const sealed = await sealSecret(await newKey(), 'value');
    const r = await openSecret(await newKey(), sealed);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatchObject({ code: 'config_error', message: expect.stringContaining('GATEHOUSE_SECRETS_KEY') });
  });

  it('refuses a value copied under another team or name', async () => {
    const key = await newKey();
    const sealed = await sealSecret(key, 'value', 'team-a/github');
    expect((await openSecret(key, sealed, 'team-b/github')).ok).toBe(false);
    expect((await openSecret(key, sealed, 'team-a/other')).ok).toBe(false);
  });

  it('refuses a sealed value with any byte altered', async () => {
    const key = await newKey();
    const sealed = await sealSecret(key, 'value');
    const [v, iv, body] = sealed.split('.');
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    for (const bad of [`${v}.${flip(iv, 3)}.${body}`, `${v}.${iv}.${flip(body, 0)}`, `${v}.${iv}.${flip(body, body.length - 2)}`]) {
      expect((await openSecret(key, bad)).ok).toBe(false);
    }
    const truncated = await openSecret(key, `${v}.${iv}.${body.slice(0, 10)}`);
    expect(truncated).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(await openSecret(key, 'plaintext')).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
  });

  it('refuses a key that is not 32 bytes of base64, saying what a key must be', async () => {
    for (const raw of ['', 'short', randomBytes(16).toString('base64'), '!!!!']) {
      const r = await importSecretsKey(raw);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.message).toContain('32 random bytes in base64');
    }
  });

  it('refuses every secret operation when the gateway has no key', async () => {
    const r = await secretsKey({});
    expect(r).toMatchObject({ ok: false, error: { code: 'config_error', message: expect.stringContaining('GATEHOUSE_SECRETS_KEY is not set') } });
    expect((await secretsKey({ GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64url') })).ok).toBe(true);
  });
});
