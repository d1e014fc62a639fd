import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { importSecretsKey, openSecret, sealSecret } from '../../src/platform/secret-box.ts';

const keyOf = async (b64: string) => {
  const k = await importSecretsKey(b64);
  if (!k.ok) throw new Error(k.message);
  return k.key;
};

describe('secret box', () => {
  it('opens what it sealed, for the same place only', async () => {
    const key = await keyOf(randomBytes(32).toString('base64'));
    const sealed = await sealSecret(key, '{"X-Api-Key":"s3cret"}', 'team-a:docs');
    expect(sealed).not.toContain('s3cret');
    expect(await openSecret(key, sealed, 'team-a:docs')).toBe('{"X-Api-Key":"s3cret"}');
    // Moved to another team or id, or under another key, or altered: it does not open.
    expect(await openSecret(key, sealed, 'team-b:docs')).toBeNull();
    expect(await openSecret(await keyOf(randomBytes(32).toString('base64')), sealed, 'team-a:docs')).toBeNull();
    const [v, iv, ct] = sealed.split('.');
    expect(await openSecret(key, `${v}.${iv}.${ct!.slice(0, -2)}AA`, 'team-a:docs')).toBeNull();
  });

  it('names the variable when the key is missing or malformed', async () => {
    expect(await importSecretsKey(undefined)).toMatchObject({ ok: false, message: expect.stringContaining('GATEHOUSE_SECRETS_KEY is not set') });
    expect(await importSecretsKey(randomBytes(16).toString('base64'))).toMatchObject({ ok: false, message: expect.stringContaining('must be 32 bytes') });
  });
});
