/**
 * The artifact upload routes' own refusals, on the routes alone (Hono `app.request()` in Node,
 * with an authenticated agent): a single request body over Cloudflare's limit is refused from its
 * Content-Length before anything is read or stored — `wrangler dev` buffers a whole body before the
 * Worker sees it, so the whole-system tests (test/e2e/big-outputs.test.ts) cover the multipart path.
 */
import { describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import type { AppEnv, Env } from '../../src/env.ts';
import { putPart, putWhole } from '../../src/dispatch/artifact-routes.ts';
import { REQUEST_BODY_MAX_BYTES } from '../../src/platform/limits.ts';

/** Any storage or DO access fails the test: these refusals must come before all of it. */
const untouchable = new Proxy(
  {},
  {
    get: (_t, name) => {
      throw new Error(`the route touched env.${String(name)} before refusing`);
    },
  },
) as Env;

function app() {
  const a = new Hono<AppEnv>();
  a.use('*', async (c, next) => {
    c.set('principal', { team: 'acme', subject: 'agent-a', scopes: ['agent'], tokenId: 't1', issuer: 'http://gw.test' });
    await next();
  });
  a.put('/artifacts/:handle/:stream', putWhole);
  a.put('/artifacts/:handle/:stream/multipart/:part', putPart);
  return a;
}

const put = (path: string, length: number) =>
  app().request(
    path,
    {
      method: 'PUT',
      headers: { 'Content-Length': String(length), 'X-Gatehouse-Job': 'j1' },
    },
    untouchable,
  );

describe('artifact upload routes', () => {
  it("refuse one request body over Cloudflare's request limit, and say to upload in parts", async () => {
    const r = await put('/artifacts/art_abcdefgh/stdout', REQUEST_BODY_MAX_BYTES + 1);
    expect(r.status).toBe(413);
    const { error } = (await r.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('payload_too_large');
    expect(error.message).toBe(
      `a request body of ${REQUEST_BODY_MAX_BYTES + 1} bytes is over Cloudflare's limit of 100000000 bytes per request (Workers request limits, Free and Pro plans); ` +
        'upload it in parts: POST …/multipart, then PUT …/multipart/{n} per part, then POST …/multipart/complete',
    );
    // A part is one request body too.
    expect((await put('/artifacts/art_abcdefgh/stdout/multipart/1', REQUEST_BODY_MAX_BYTES + 1)).status).toBe(413);
  });

  it('refuse a malformed stream, handle or part number with what is allowed', async () => {
    expect(await (await put('/artifacts/art_abcdefgh/stdin', 1)).json()).toMatchObject({ error: { message: 'stream must be stdout or stderr, got "stdin"' } });
    expect((await put('/artifacts/x/stdout', 1)).status).toBe(400);
    expect(await (await put('/artifacts/art_abcdefgh/stdout/multipart/0', 1)).json()).toMatchObject({
      error: { message: 'part must be a number from 1, got "0"' },
    });
  });
});
