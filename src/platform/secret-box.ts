/**
 * Team secrets at rest: AES-256-GCM with WebCrypto under the gateway's `GATEHOUSE_SECRETS_KEY`
 * (32 random bytes, base64; `npm start` writes a dev one to .gatehouse/secrets-key). A sealed value is
 * `v1.<iv>.<ciphertext+tag>` (base64url); a fresh 96-bit IV each seal, so sealing a value twice gives two
 * different strings. Optional `context` (e.g. "team/name") is bound as additional data: a sealed value
 * copied under another team or name does not open. Platform is the ground floor, so the error values are
 * shaped like src/contracts/errors.ts's without importing it.
 */
import type { Env } from '../env.ts';

export type SecretBoxResult<T> = { ok: true; value: T } | { ok: false; error: { code: 'config_error' | 'invalid_argument'; message: string } };

const VERSION = 'v1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
/** GCM's tag is 16 bytes; a sealed value shorter than that cannot be ours. */
const TAG_BYTES = 16;
const KEY_HELP = 'GATEHOUSE_SECRETS_KEY must be 32 random bytes in base64 (make one: openssl rand -base64 32)';

const fail = (code: 'config_error' | 'invalid_argument', message: string): SecretBoxResult<never> => ({ ok: false, error: { code, message } });

function fromBase64(s: string): Uint8Array | null {
  const std = s.trim().replace(/-/g, '+').replace(/_/g, '/');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(std)) return null;
  try {
    const bin = atob(std.padEnd(Math.ceil(std.length / 4) * 4, '='));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

function toBase64Url(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The AES-GCM key from its base64 text; a config_error saying what a key must be otherwise. */
export async function importSecretsKey(raw: string): Promise<SecretBoxResult<CryptoKey>> {
  const bytes = fromBase64(raw);
  if (!bytes || bytes.length !== KEY_BYTES) {
    return fail('config_error', `${KEY_HELP}; the value given is ${bytes ? `${bytes.length} bytes` : 'not base64'}`);
  }
  const key = await crypto.subtle.importKey('raw', bytes, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt']);
  return { ok: true, value: key };
}

const imported = new WeakMap<object, Promise<SecretBoxResult<CryptoKey>>>();

/**
 * The deployment's secrets key, imported once per `env` object. Without it every secret operation is
 * refused with a config_error: a gateway never stores a secret it could not seal.
 */
export function secretsKey(env: Pick<Env, 'GATEHOUSE_SECRETS_KEY'>): Promise<SecretBoxResult<CryptoKey>> {
  let r = imported.get(env);
  if (!r) {
    r = env.GATEHOUSE_SECRETS_KEY
      ? importSecretsKey(env.GATEHOUSE_SECRETS_KEY)
      : Promise.resolve(fail('config_error', `team secrets are off: GATEHOUSE_SECRETS_KEY is not set; ${KEY_HELP}, set with wrangler secret put`));
    imported.set(env, r);
  }
  return r;
}

/** Seals `plaintext`; `context` (optional) must be given again to open it. */
export async function sealSecret(key: CryptoKey, plaintext: string, context = ''): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const data = new TextEncoder().encode(plaintext);
  const sealed = await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(context) }, key, data);
  return `${VERSION}.${toBase64Url(iv)}.${toBase64Url(new Uint8Array(sealed))}`;
}

/**
 * Opens a value `sealSecret` made. A value altered in storage, sealed under another key or another
 * context fails GCM's check and is an error value, never garbage plaintext.
 */
export async function openSecret(key: CryptoKey, sealed: string, context = ''): Promise<SecretBoxResult<string>> {
  const parts = sealed.split('.');
  const iv = parts.length === 3 && parts[0] === VERSION ? fromBase64(parts[1]) : null;
  const body = iv ? fromBase64(parts[2]) : null;
  if (!iv || iv.length !== IV_BYTES || !body || body.length < TAG_BYTES) {
    return fail('invalid_argument', `not a sealed secret: expected "${VERSION}.<iv>.<ciphertext>" in base64url`);
  }
  try {
    const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(context) }, key, body);
    return { ok: true, value: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(plain) };
  } catch {
    return fail(
      'config_error',
      'a stored secret does not open with GATEHOUSE_SECRETS_KEY: the key was changed since it was set, or the stored value was altered; set the secret again',
    );
  }
}
