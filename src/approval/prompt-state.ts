/**
 * The `requestState` of an approval prompt (2026-07-28 `input_required`): the SDK's HMAC codec,
 * bound to the caller's team and subject, carrying the approval id and the request hash, and
 * expiring with the prompt. The client echoes it back; a tampered, foreign or malformed state
 * never reaches a tool (the SDK answers -32602), while an authentic but expired one reaches the
 * tool as `{ expired: true }` so the caller gets a denial that says why.
 *
 * The key is derived from the gateway's signing secret (HMAC with a fixed label), so every
 * isolate of a deployment shares it without another secret to configure.
 */
import { createRequestStateCodec, type ServerContext } from '@modelcontextprotocol/server';
import type { Env } from '../env.ts';
import type { Principal } from '../auth/principal.ts';

export interface PromptState {
  /** Approval id. */
  a: string;
  /** Hash of the exact request the prompt is about. */
  h: string;
}
export type VerifiedPromptState = PromptState | { expired: true };

const KEY_LABEL = 'gatehouse approval prompt request-state v1';
const keys = new Map<string, Promise<Uint8Array>>();

function stateKey(secret: string): Promise<Uint8Array> {
  let k = keys.get(secret);
  if (!k) {
    k = (async () => {
      const hmac = await crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
      return new Uint8Array(await crypto.subtle.sign('HMAC', hmac, new TextEncoder().encode(KEY_LABEL)));
    })();
    keys.set(secret, k);
  }
  return k;
}

/** The secret the key derives from; none → approval prompts are off and callers get the admin flow. */
export function stateSecret(env: Pick<Env, 'GATEHOUSE_SIGNING_KEY' | 'GATEHOUSE_HS_SECRET'>): string | undefined {
  return env.GATEHOUSE_SIGNING_KEY || env.GATEHOUSE_HS_SECRET || undefined;
}

const bindingOf = (p: Principal): string => `${p.team}\u0000${p.subject}`;

export async function mintPromptState(env: Env, p: Principal, state: PromptState, ttlSeconds: number, ctx: ServerContext): Promise<string> {
  const secret = stateSecret(env);
  if (!secret) throw new Error('approval prompts need GATEHOUSE_SIGNING_KEY or GATEHOUSE_HS_SECRET');
  const codec = createRequestStateCodec<PromptState>({ key: await stateKey(secret), ttlSeconds, bind: () => bindingOf(p) });
  return codec.mint(state, ctx);
}

/** `ServerOptions.requestState.verify` for one caller's server. Throws (→ -32602) on anything but authentic state. */
export function promptStateVerifier(env: Env, p: Principal): (state: string, ctx: ServerContext) => Promise<VerifiedPromptState> {
  return async (state, ctx) => {
    const secret = stateSecret(env);
    if (!secret) throw new Error('no key');
    // ttlSeconds only matters when minting: the expiry travels inside the state.
    const codec = createRequestStateCodec<PromptState>({ key: await stateKey(secret), bind: () => bindingOf(p) });
    try {
      return await codec.verify(state, ctx);
    } catch (e) {
      // The MAC is checked before the expiry, so only authentic state can be "expired".
      if (e instanceof Error && e.message === 'expired') return { expired: true };
      throw e;
    }
  };
}
