/**
 * Secrets at rest (a remote MCP server's headers, a team secret): AES-256-GCM under the deployment's
 * key, env `GATEHOUSE_SECRETS_KEY` (32 bytes, base64). A sealed value is `v1.<iv>.<ciphertext>` in
 * base64url; the team's object stores only that, so its storage (or an export of it) reveals nothing.
 * `aad` binds a sealed value to where it belongs (a team and a name): moved elsewhere it does not open.
 */
const VERSION = 'v1';
const IV_BYTES = 12;

export type SecretsKeyResult = { ok: true; key: CryptoKey } | { ok: false; message: string };

/** The deployment's secrets key; a missing or malformed variable is a configuration error naming it. */
export async function importSecretsKey(raw: string | undefined): Promise<SecretsKeyResult> {
  if (!raw) return { ok: false, message: 'GATEHOUSE_SECRETS_KEY is not set: secrets cannot be stored or read (set 32 random bytes, base64)' };
  let bytes: Uint8Array;
  try {
    bytes = fromB64(raw.trim());
  } catch {
    return { ok: false, message: 'GATEHOUSE_SECRETS_KEY is not base64' };
  }
  if (bytes.byteLength !== 32) return { ok: false, message: `GATEHOUSE_SECRETS_KEY must be 32 bytes (base64); it is ${bytes.byteLength}` };
  const key = await crypto.subtle.importKey('raw', bytes, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt']);
  return { ok: true, key };
}

export async function sealSecret(key: CryptoKey, plaintext: string, aad: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const ct = await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(aad) }, key, new TextEncoder().encode(plaintext));
  return `${VERSION}.${toB64(iv)}.${toB64(new Uint8Array(ct))}`;
}

/** The plaintext, or null when the value was sealed under another key, for another place, or altered. */
export async function openSecret(key: CryptoKey, sealed: string, aad: string): Promise<string | null> {
  const [v, iv, ct] = sealed.split('.');
  if (v !== VERSION || !iv || !ct) return null;
  try {
    const pt = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: fromB64(iv), additionalData: new TextEncoder().encode(aad) }, key, fromB64(ct));
    return new TextDecoder().decode(pt);
  } catch {
    return null;
  }
}

function toB64(b: Uint8Array): string {
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromB64(s: string): Uint8Array {
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
